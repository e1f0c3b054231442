// `cmesh`: one commander program; each subcommand lives in commands/<name>.ts and exports
// `register(program)`.
import { Command } from 'commander';
import { existsSync } from 'fs';
import { join } from 'path';

const COMMANDS = ['run', 'up', 'status', 'bench', 'demo'];

export function buildProgram(): Command {
  const program = new Command('cmesh')
    .description('collective communication as a service: launcher, local cluster, benchmarks')
    .showHelpAfterError()
    .enablePositionalOptions();
  for (const name of COMMANDS) {
    const file = join(__dirname, 'commands', `${name}.ts`);
    // TODO(integration): import every command explicitly once all exist
    if (existsSync(file)) require(file).register(program);
  }
  return program;
}

if (require.main === module || process.argv[1]?.endsWith('cmesh.js')) {
  buildProgram()
    .parseAsync(require('./commands/run').normaliseFlags(process.argv))
    .catch((err: Error) => {
      console.error(`cmesh: ${err.message}`);
      process.exit(1);
    });
}
