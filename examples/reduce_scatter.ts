// Port of src/ch2/reduce_scatter.py (large-scale-lm-tutorials). The original's output
// shows a "Before:" and an "After:" line per rank, so both are printed here.
// Run: cmesh run --nproc-per-node 4 examples/reduce_scatter.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  // torch.tensor([1, 10, 100, 1000]) * rank is int64
  const inputs = BigInt64Array.from([1n, 10n, 100n, 1000n].map((x) => x * BigInt(rank)));
  const inputList = [0, 1, 2, 3].map((i) => inputs.subarray(i, i + 1)); // torch.split(.., 1)
  // rank==0 => [0, 00, 000, 0000]
  // rank==1 => [1, 10, 100, 1000]
  // rank==2 => [2, 20, 200, 2000]
  // rank==3 => [3, 30, 300, 3000]

  const output = BigInt64Array.from([0n]); // torch.tensor([0])
  console.log(`Before: rank ${rank} output: ${new Shaped(output)}\n`);

  await dist.reduceScatter(output, inputList, { op: dist.ReduceOp.SUM });

  console.log(`After: rank ${rank} output: ${new Shaped(output)}\n`);
  await dist.destroyProcessGroup();
});
