// How to start a worker script: .ts through swc's require hook, .js with node, anything else as is.
import * as path from 'path';

const REPO_TSCONFIG = path.resolve(__dirname, '../../../../tsconfig.json');

export function workerCommand(script: string, args: string[]): { command: string; args: string[]; env: Record<string, string> } {
  const ext = path.extname(script);
  if (ext === '.ts' || ext === '.mts' || ext === '.cts') {
    return {
      command: process.execPath,
      args: ['-r', require.resolve('@swc-node/register'), script, ...args],
      env: { TS_NODE_PROJECT: process.env.TS_NODE_PROJECT ?? REPO_TSCONFIG },
    };
  }
  if (ext === '.js' || ext === '.cjs' || ext === '.mjs') return { command: process.execPath, args: [script, ...args], env: {} };
  return { command: script, args, env: {} };
}
