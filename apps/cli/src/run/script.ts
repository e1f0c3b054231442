// How `cmesh run` starts a worker script, from any directory: .js, .cjs and .mjs with node as
// they are; .ts, .cts and .mts through swc's require hook (@swc-node/register, a dependency of
// the CLI, so it works on every supported Node: 20, 22, 24); anything else as an executable.
// In a checkout, the checkout's tsconfig maps @cmesh/* to the sources; installed, swc reads the
// script's own project tsconfig (TS_NODE_PROJECT, or ./tsconfig.json) if there is one.
import { accessSync, constants, statSync } from 'fs';
import { delimiter, join } from 'path';
import { nodeArgs, programEnv } from '../programs';
import { UsageError } from '../usage';

const isScript = (script: string) => /\.[cm]?[jt]s$/.test(script);

/**
 * Refuses a script that cannot start, before any worker does: a .js/.ts file that is not there,
 * or an executable that is neither a file nor on PATH.
 */
export function checkScript(script: string, env: NodeJS.ProcessEnv = process.env): void {
  const file = (p: string) => {
    try {
      return statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (isScript(script) || script.includes('/')) {
    if (!file(script)) throw new UsageError(`script ${JSON.stringify(script)} not found (no such file from ${process.cwd()})`);
    if (!isScript(script)) {
      try {
        accessSync(script, constants.X_OK);
      } catch {
        throw new UsageError(`script ${JSON.stringify(script)} is not executable (a .js or .ts script runs with node; chmod +x for others)`);
      }
    }
    return;
  }
  const onPath = (env.PATH ?? '')
    .split(delimiter)
    .filter(Boolean)
    .some((dir) => file(join(dir, script)));
  if (!onPath) throw new UsageError(`script ${JSON.stringify(script)} not found: not a file, and no such command on PATH`);
}

export function workerCommand(script: string, args: string[]): { command: string; args: string[]; env: Record<string, string> } {
  if (isScript(script)) return { command: process.execPath, args: [...nodeArgs(script), ...args], env: programEnv() };
  return { command: script, args, env: {} };
}
