// Port of src/ch2/process_group_4.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/process_group_4.ts
// The original uses nccl on GPUs; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  // 프로세스 그룹 초기화 (env:// from the launcher)

  const group = await dist.newGroup([...Array(dist.getWorldSize()).keys()]);
  // 프로세스 그룹 생성

  console.log(`${group} - rank: ${dist.getRank()}\n`);
  await dist.destroyProcessGroup();
});
