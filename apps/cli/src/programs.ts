// How the CLI starts cmesh's own Node programs (the coordinator, rank agents, bench ranks) in
// child processes: from the TypeScript sources through swc when it runs from a checkout, from the
// built dist/ when it runs installed (or built), or when CMESH_PROGRAMS=dist asks for them (the
// suite sets it after its build: a program compiled by swc at every start costs its process about
// half a second of CPU, and the suite starts hundreds).
import { readFileSync } from 'fs';
import { dirname, extname, join, resolve } from 'path';

/** True when this CLI starts programs from their TypeScript sources (a checkout, through swc). */
const FROM_SOURCE = extname(__filename) === '.ts' && process.env.CMESH_PROGRAMS !== 'dist';

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

/**
 * The mesh's server side, which `cmesh up` and `cmesh demo` start: optional peer dependencies of
 * @cmesh/cli, so that installing the launcher (`cmesh run`) does not install NestJS, Express,
 * pino and prom-client. (@cmesh/client comes with @cmesh/rank-agent.)
 */
const MESH_PACKAGES = ['@cmesh/coordinator', '@cmesh/rank-agent'] as const;

/** `cmesh up` or `cmesh demo` where the mesh's packages are not installed beside @cmesh/cli. */
class MeshPackagesMissingError extends Error {
  constructor(readonly missing: readonly string[]) {
    const version = cliVersion();
    const tarballs = ['client', ...MESH_PACKAGES.map((p) => p.slice('@cmesh/'.length))];
    super(
      `the mesh (cmesh up, cmesh demo) needs ${MESH_PACKAGES.join(' and ')}; not installed here: ${missing.join(', ')} ` +
        `(cmesh run, status, scan and bench work without them). Install them beside @cmesh/cli; from a clone of cmesh, ` +
        `after \`npm run pack\` there: npm install <clone>/dist-packages/cmesh-{${tarballs.join(',')}}-${version}.tgz`,
    );
    this.name = 'MeshPackagesMissingError';
  }
}

/** Throws MeshPackagesMissingError, naming each one, unless every MESH_PACKAGES package resolves. */
export function requireMeshPackages(): void {
  const missing = MESH_PACKAGES.filter((pkg) => {
    try {
      require.resolve(`${pkg}/package.json`);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length > 0) throw new MeshPackagesMissingError(missing);
}

/** The CLI package's version (its package.json sits one level above src/ and dist/ alike). */
function cliVersion(): string {
  return (JSON.parse(readFileSync(join(__dirname, '../package.json'), 'utf8')) as { version: string }).version;
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
