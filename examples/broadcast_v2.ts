// Port of broadcast.py (a different example than large-scale-lm-tutorials' broadcast.py) from "Parameter Server and All-Reduce" (Korean).
// Run: cmesh run --nproc-per-node 4 examples/broadcast_v2.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  // rank 0: torch.tensor([rank], dtype=torch.float32); others: torch.empty(1)
  const tensor = rank === 0 ? Float32Array.from([rank]) : new Float32Array(1);
  // rank 0번의 tensor ([0.])을 다른 모든 rank에 전송
  await dist.broadcast(tensor, { src: 0 });
  console.log(`[${rank}] data = ${new Shaped(tensor)}`);
  await dist.destroyProcessGroup();
});
