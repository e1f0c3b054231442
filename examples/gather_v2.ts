// Port of gather.py (a different example than large-scale-lm-tutorials' gather.py) from "Parameter Server and All-Reduce" (Korean).
// Run: cmesh run --nproc-per-node 4 examples/gather_v2.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();
  const worldSize = 4;

  const tensor = Float32Array.from([rank]);
  // 모든 랭크의 tensor를 랭크 0번으로 보내고 하나의 리스트에 저장
  let tensorList: Float32Array[] = [];
  if (rank === 0) {
    tensorList = Array.from({ length: worldSize }, () => new Float32Array(1)); // torch.empty(1)
    await dist.gather(tensor, { gatherList: tensorList, dst: 0 });
  } else {
    await dist.gather(tensor, { gatherList: [], dst: 0 });
  }
  // [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])]
  if (rank === 0) {
    console.log(`[${rank}] data = ${listRepr(tensorList)}`);
  }
  await dist.destroyProcessGroup();
});
