// Port of src/ch2/scatter_nccl.py (large-scale-lm-tutorials): scatter without a
// scatter collective. Every rank builds the same inputs and keeps its own split; no
// communication at all, only the process group.
// Run: cmesh run --nproc-per-node 4 examples/scatter_nccl.ts
// The original uses nccl on GPUs; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  const inputs = Float32Array.from([10.0, 20.0, 30.0, 40.0]);
  // torch.split(inputs, dim=-1, split_size_or_sections=1)
  const splits = [0, 1, 2, 3].map((i) => inputs.subarray(i, i + 1));
  const output = splits[rank].slice(); // .contiguous() copy
  console.log(`after rank ${rank}: ${new Shaped(output)}\n`);
  await dist.destroyProcessGroup();
});
