// Port of test.py ("Parameter Server and All-Reduce"): mp.spawn(worker,
// args=(world_size,), nprocs=world_size). Named mp_spawn_test.ts rather than test.ts.
// Run: node -r @swc-node/register examples/mp_spawn_test.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

// subprocess에서 실행될 함수 정의
function worker(rank: number, worldSize: number): void {
  console.log(` ${worldSize} rank: ${rank}`);
}

// main process 정의
runMain(async () => {
  const worldSize = 4; // 프로세스 수
  await dist.spawn(worker, { args: [worldSize], nprocs: worldSize });
});
