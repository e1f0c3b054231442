// Port of all_gather.py from "Parameter Server and All-Reduce" (Korean).
// Run: cmesh run --nproc-per-node 4 examples/all_gather.ts
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
  // 모든 랭크의 tensor를 다른 모든 랭크에 보내고 각각의 랭크는 수신된 tensor를 하나의 리스트로 저장
  const tensorList = Array.from({ length: worldSize }, () => new Float32Array(1)); // torch.empty(1)
  await dist.allGather(tensorList, tensor);
  // 모든 랭크들은 [tensor([0.]), tensor([1.]), tensor([2.]), tensor([3.])] 을 가지게 됨
  console.log(`[${rank}] data = ${listRepr(tensorList)}`);
  await dist.destroyProcessGroup();
});
