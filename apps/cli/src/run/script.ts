// How `cmesh run` starts a worker script, from any directory: .js, .cjs and .mjs with node as
// they are; .ts, .cts and .mts through swc's require hook (@swc-node/register, a dependency of
// the CLI, so it works on every supported Node: 20, 22, 24); anything else as an executable.
// In a checkout, the checkout's tsconfig maps @cmesh/* to the sources; installed, swc reads the
// script's own project tsconfig (TS_NODE_PROJECT, or ./tsconfig.json) if there is one.
import { nodeArgs, programEnv } from '../programs';

export function workerCommand(script: string, args: string[]): { command: string; args: string[]; env: Record<string, string> } {
  if (/\.[cm]?[jt]s$/.test(script)) return { command: process.execPath, args: [...nodeArgs(script), ...args], env: programEnv() };
  return { command: script, args, env: {} };
}
