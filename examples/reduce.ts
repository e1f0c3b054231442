// Port of reduce.py from "Parameter Server and All-Reduce" (Korean).
// Run: cmesh run --nproc-per-node 4 examples/reduce.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { itemStr } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  const tensor = new Float32Array(1).fill(1); // torch.ones(1)
  // rank 0번에 각 rank의 tensor 를 보내 합친 결과를 rank 0에 저장
  await dist.reduce(tensor, { op: dist.ReduceOp.SUM, dst: 0 });

  console.log(`[${rank}] data = ${itemStr(tensor, 0)}`);
  await dist.destroyProcessGroup();
});
