// Port of multiprocess_launch.py, second version ("Parameter Server and All-Reduce"): init, then print the default group.
// Run: cmesh run --nproc-per-node 4 examples/multiprocess_launch_v2.ts
// The original uses nccl on GPUs; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

runMain(async () => {
  // Process_group 초기화
  await dist.initProcessGroup({ backend: 'tcp' });

  const group = dist.GroupMember.WORLD;
  // torch: dist.distributed_c10d._get_default_group() (the same object as dist.group.WORLD)
  // 새로운 process 그룹 생성
  // const group = await dist.newGroup([...Array(dist.getWorldSize()).keys()]);

  console.log(`${group} - rank: ${dist.getRank()}\n`);
  await dist.destroyProcessGroup();
});
