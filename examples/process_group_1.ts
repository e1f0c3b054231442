// Port of src/ch2/process_group_1.py (large-scale-lm-tutorials; the same in its notebook version). It fails on purpose:
// env:// needs MASTER_ADDR and MASTER_PORT, and the error names the missing variable.
// Run: node -r @swc-node/register examples/process_group_1.ts   (expected: exits 1, MASTER_ADDR)
// The original uses nccl; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp', rank: 0, worldSize: 1 });
  // 프로세스 그룹 초기화

  const processGroup = await dist.newGroup([0]);
  // 0번 프로세스가 속한 프로세스 그룹 생성

  console.log(`${processGroup}`);
  await dist.destroyProcessGroup();
});
