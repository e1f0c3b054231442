// `cmesh`: one commander program; each subcommand lives in commands/<name>.ts and exports
// `register(program)`.
import { Command } from 'commander';
import * as bench from './commands/bench';
import * as demo from './commands/demo';
import * as run from './commands/run';
import * as status from './commands/status';
import * as up from './commands/up';

export function buildProgram(): Command {
  const program = new Command('cmesh')
    .description('collective communication as a service: launcher, local cluster, benchmarks')
    .showHelpAfterError()
    .enablePositionalOptions();
  for (const command of [run, up, status, bench, demo]) command.register(program);
  return program;
}

/** Runs the command line (bin/cmesh.js, `npx cmesh`, or this file run directly). */
export function main(argv: string[] = process.argv): void {
  buildProgram()
    .parseAsync(run.normaliseFlags(argv))
    .catch((err: Error) => {
      console.error(`cmesh: ${err.message}`);
      process.exit(1);
    });
}

if (require.main === module) main();
