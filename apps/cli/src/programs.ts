// How the CLI starts cmesh's own Node programs (the coordinator, rank agents, bench ranks) in
// child processes: from the TypeScript sources through swc when it runs from a checkout, from the
// built dist/ when it runs installed (or built).
import { dirname, extname, join, resolve } from 'path';

/** True when this CLI runs from its TypeScript sources (a checkout, through swc). */
const FROM_SOURCE = extname(__filename) === '.ts';

/** The checkout's tsconfig (its `paths` map @cmesh/* to the sources); only meaningful FROM_SOURCE. */
const SOURCE_TSCONFIG = resolve(__dirname, '../../../tsconfig.json');

/** Node options `file` needs (fork's execArgv): a .ts file goes through swc's require hook. */
export function execArgvFor(file: string): string[] {
  return file.endsWith('.ts') ? ['-r', require.resolve('@swc-node/register')] : [];
}

/** `node` arguments that run `file`. */
export function nodeArgs(file: string): string[] {
  return [...execArgvFor(file), file];
}

/** Environment a child started with nodeArgs needs: swc finds the checkout's tsconfig. */
export function programEnv(): Record<string, string> {
  return FROM_SOURCE ? { TS_NODE_PROJECT: process.env.TS_NODE_PROJECT ?? SOURCE_TSCONFIG } : {};
}

/** The entry file `name` (without extension) of package `pkg`, e.g. ('@cmesh/coordinator', 'main'). */
export function programOf(pkg: string, name: string): string {
  const dir = dirname(require.resolve(`${pkg}/package.json`));
  return FROM_SOURCE ? join(dir, 'src', `${name}.ts`) : join(dir, 'dist', `${name}.js`);
}

/** A module beside the caller (`dir` is the caller's __dirname), in the caller's own form (.ts or .js). */
export function sibling(dir: string, name: string): string {
  return join(dir, name + extname(__filename));
}
