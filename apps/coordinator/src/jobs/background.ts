// Work started and not waited for (a tick's renewals and sweeps, a job's end after an event):
// its failure is logged, never lost, and never an unhandled rejection that would end the process.
import { Logger } from '@nestjs/common';

export function inBackground(log: Logger, what: string, work: Promise<unknown>): void {
  work.catch((e: Error) => log.warn(`${what}: ${e.message}`));
}
