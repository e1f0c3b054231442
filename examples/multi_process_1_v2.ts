// Port of src/multi_process_1.py (large-scale-lm-tutorials, the notebook version: daemon=False and no final print).
// The user's code is the main process and starts a function in subprocesses by hand, with the
// "spawn" start method: each child is a fresh Node process running this file (fork), which runs
// only fn(rank, ...args) — the analogue of Python's mp.Process(target=fn, args=...).
// (process.daemon = False in the original; the main process joins every child either way.)
// Run: node -r @swc-node/register examples/multi_process_1_v2.ts
import { ChildProcess, fork } from 'child_process';
import { runMain } from './_lib/main';

const CHILD_FLAG = '--mp-child';

// 서브프로세스에서 동시에 실행되는 영역
function fn(rank: number, param1: string, param2: string): void {
  console.log(`${param1} ${param2} - rank: ${rank}`);
}

/** Resolves when the child exits with 0; listens from the start so no exit is missed. */
function exited(p: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    p.once('error', reject);
    p.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`process ${p.pid} exited with ${signal ?? code}`))));
  });
}

const childAt = process.argv.indexOf(CHILD_FLAG);
if (childAt >= 0) {
  // a subprocess: run the target with its arguments
  const [rank, param1, param2] = process.argv.slice(childAt + 1);
  fn(Number(rank), param1, param2);
} else {
  // 메인 프로세스
  runMain(async () => {
    const processes: Promise<void>[] = [];
    for (let rank = 0; rank < 4; rank++) {
      // 서브프로세스 생성 + 시작 (fork keeps the -r @swc-node/register of this process)
      const process_ = fork(__filename, [CHILD_FLAG, String(rank), 'A0', 'B1']);
      processes.push(exited(process_));
    }

    for (const process_ of processes) {
      await process_; // 서브 프로세스 join (=완료되면 종료)
    }
  });
}
