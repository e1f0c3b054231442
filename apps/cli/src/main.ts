// `cmesh`: one commander program; each subcommand lives in commands/<name>.ts and exports
// `register(program)`.
import { Command } from 'commander';
import * as fs from 'fs';
import * as path from 'path';
import * as bench from './commands/bench';
import * as demo from './commands/demo';
import * as run from './commands/run';
import * as scan from './commands/scan';
import * as status from './commands/status';
import * as trace from './commands/trace';
import * as ui from './commands/ui';
import * as up from './commands/up';
import * as secrets from './commands/secrets';
import { alreadyReported, exitCodeFor } from './usage';

/** The CLI package's version (package.json sits one level above src/ and dist/ alike). */
export function cliVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(__dirname, '../package.json'), 'utf8')) as { version: string }).version;
}

export function buildProgram(): Command {
  const program = new Command('cmesh')
    .description('collective communication as a service: launcher, local cluster, benchmarks')
    .version(cliVersion(), '-V, --version', 'print the version of cmesh')
    .showHelpAfterError()
    .enablePositionalOptions()
    // parse errors reach main() (exit 2, as argparse) instead of commander's exit(1); subcommands
    // registered below inherit it
    .exitOverride();
  for (const command of [run, up, status, ui, scan, trace, bench, demo, secrets]) command.register(program);
  return program;
}

/** Runs the command line (bin/cmesh.js, `npx cmesh`, or this file run directly). */
export function main(argv: string[] = process.argv): void {
  buildProgram()
    .parseAsync(run.normaliseFlags(argv))
    .catch((err: Error) => {
      if (!alreadyReported(err)) console.error(`cmesh: ${err.message}`);
      process.exit(exitCodeFor(err));
    });
}

if (require.main === module) main();
