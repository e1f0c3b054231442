// Port of src/ch2/barrier.py (large-scale-lm-tutorials): rank 0 counts four seconds
// while the others wait in the barrier.
// Run: cmesh run --nproc-per-node 4 examples/barrier.ts
// The original uses nccl on GPUs; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain, sleep } from './_lib/main';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  if (rank === 0) {
    let seconds = 0;
    while (seconds <= 3) {
      await sleep(1000); // time.sleep(1)
      seconds += 1;
      console.log(`rank 0 - seconds: ${seconds}\n`);
    }
  }

  console.log(`rank ${rank}: no-barrier\n`);
  await dist.barrier();
  console.log(`rank ${rank}: barrier\n`);
  await dist.destroyProcessGroup();
});
