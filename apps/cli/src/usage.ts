// Usage errors: a flag, argument or setting the user gave that cmesh cannot take. Like argparse
// (torchrun, nccl-tests' wrappers) the CLI exits 2 on them, and 1 when the work itself failed.
import { CommanderError } from 'commander';
import { InvalidArgumentError as LibraryInvalidArgument } from '@cmesh/collectives';

const USAGE_EXIT_CODE = 2;

/** A bad flag value or argument, found by cmesh's own checks (after commander parsed the line). */
export class UsageError extends RangeError {
  override name = 'UsageError';
}

/**
 * The exit code for an error that ended a command: commander's own (help and version: 0, the
 * message already printed), 2 for usage errors, 1 for the rest.
 */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : USAGE_EXIT_CODE;
  if (err instanceof UsageError || err instanceof LibraryInvalidArgument) return USAGE_EXIT_CODE;
  return 1;
}

/** Whether commander already printed the error (its own parse errors and help/version output). */
export function alreadyReported(err: unknown): boolean {
  return err instanceof CommanderError;
}
