import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { exitcodeOf, formatFailureSummary } from './failure-summary';

// a whole-second local time, so the expected text does not depend on the time zone
const at = new Date(2026, 10, 24, 1, 2, 3).getTime();

describe("formatFailureSummary (torch's ChildFailedError message)", () => {
  it('prints one failure as the root cause, with <NO_OTHER_FAILURES>', () => {
    const text = formatFailureSummary('train.ts', [{ rank: 3, localRank: 1, exitcode: -9, pid: 4242, at, errorFile: '/nonexistent/error.json' }], 'node-a');
    expect(text.split('\n')).toEqual([
      '',
      '='.repeat(53),
      'train.ts FAILED',
      '-'.repeat(53),
      'Failures:',
      '  <NO_OTHER_FAILURES>',
      '-'.repeat(53),
      'Root Cause (first observed failure):',
      '[0]:',
      '  time      : 2026-11-24_01:02:03',
      '  host      : node-a',
      '  rank      : 3 (local_rank: 1)',
      '  exitcode  : -9 (pid: 4242)',
      '  error_file: <N/A>',
      '  traceback : Signal 9 (SIGKILL) received by PID 4242',
      '='.repeat(53),
    ]);
  });

  it('sets the earliest exit apart as the root cause, numbers blocks by rank, reads a record() error file', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-summary-'));
    const file = path.join(dir, 'error.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        message: { message: 'Error: boom', extraInfo: { py_callstack: 'Error: boom\n    at main (w.ts:1:1)\n', timestamp: String(at / 1000 + 1) } },
      }),
    );
    try {
      const text = formatFailureSummary(
        'w.ts',
        [
          { rank: 0, localRank: 0, exitcode: 1, pid: 10, at: at + 1500, errorFile: file },
          { rank: 1, localRank: 1, exitcode: 5, pid: 11, at, errorFile: path.join(dir, 'missing.json') },
        ],
        'h',
      );
      const [failures, root] = text.split('Root Cause (first observed failure):\n');
      expect(root.split('\n').slice(0, 7)).toEqual([
        '[1]:',
        '  time      : 2026-11-24_01:02:03',
        '  host      : h',
        '  rank      : 1 (local_rank: 1)',
        '  exitcode  : 5 (pid: 11)',
        '  error_file: <N/A>',
        "  traceback : To enable traceback, wrap the worker's entry point in record() (docs/api.md)",
      ]);
      expect(failures.split('Failures:\n')[1].split('\n').slice(0, 8)).toEqual([
        '[0]:',
        '  time      : 2026-11-24_01:02:04',
        '  host      : h',
        '  rank      : 0 (local_rank: 0)',
        '  exitcode  : 1 (pid: 10)',
        `  error_file: ${file}`,
        '  traceback : Error: boom',
        '      at main (w.ts:1:1)',
      ]);
      // the rules are as wide as the widest line, at most 60 columns
      expect(text.split('\n')[1]).toBe('='.repeat(60));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("turns a signal into minus its number, like torch's exitcode", () => {
    expect([exitcodeOf(null, 'SIGKILL'), exitcodeOf(null, 'SIGTERM'), exitcodeOf(3, null)]).toEqual([-9, -15, 3]);
  });
});
