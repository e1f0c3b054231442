// Port of scatter.py (a different example than large-scale-lm-tutorials' scatter.py) from "Parameter Server and All-Reduce" (Korean).
// Run: cmesh run --nproc-per-node 4 examples/scatter_v2.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { itemStr } from './_lib/torch-format';

runMain(async () => {
  // NCCL을 scatter operation을 지원하지 않음 (cmesh's CPU backend has every collective)
  await dist.initProcessGroup({ backend: 'gloo' });
  const rank = dist.getRank();
  const worldSize = 4;

  const tensor = new Float32Array(1); // torch.empty(1)
  // 랭크 0번의 tensor를 world size 만큼 나눠서 각각의 rank에 전송
  if (rank === 0) {
    const tensorList = Array.from({ length: worldSize }, (_, i) => Float32Array.from([i + 1]));
    // tensor_list = [tensor(1), tensor(2), tensor(3), tensor(4)]
    await dist.scatter(tensor, { scatterList: tensorList, src: 0 });
  } else {
    await dist.scatter(tensor, { scatterList: [], src: 0 });
  }
  console.log(`[${rank}] data = ${itemStr(tensor, 0)}`);
  await dist.destroyProcessGroup();
});
