// record(): torch.distributed.elastic's @record for Node. Wraps a worker's entry point so that an
// error escaping it is written to TORCHELASTIC_ERROR_FILE (set by `cmesh run` for each worker)
// before it propagates; the launcher's failure summary then shows the error and its stack instead
// of the exit code alone. The file has torch's layout, so torch's tools read it too.
import * as fs from 'fs';
import * as path from 'path';

export const ERROR_FILE_ENV = 'TORCHELASTIC_ERROR_FILE';

/** torch's error file: { message: { message, extraInfo: { py_callstack, timestamp } } }. */
export interface ErrorFileData {
  message: string | { message: string; extraInfo?: { py_callstack?: string; timestamp?: string } };
  timestamp?: string;
}

/** Writes `err` to the error file named by TORCHELASTIC_ERROR_FILE (no-op where it is unset). */
export function recordError(err: unknown, env: NodeJS.ProcessEnv = process.env): void {
  const file = env[ERROR_FILE_ENV];
  if (!file) return;
  const e = err instanceof Error ? err : new Error(String(err));
  const data: ErrorFileData = {
    message: {
      message: `${e.name}: ${e.message}`,
      extraInfo: { py_callstack: e.stack ?? `${e.name}: ${e.message}`, timestamp: String(Math.floor(Date.now() / 1000)) },
    },
  };
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // the first error written wins: an outer record() does not overwrite an inner one's
    fs.writeFileSync(file, JSON.stringify(data), { flag: 'wx' });
  } catch {
    /* already written, or the directory is gone: the launcher falls back to the exit code */
  }
}

/** Wraps `fn`: an error it throws (or a rejection) is recorded, then rethrown unchanged. */
export function record<A extends unknown[], T>(fn: (...args: A) => T | Promise<T>): (...args: A) => Promise<T> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (err) {
      recordError(err);
      throw err;
    }
  };
}
