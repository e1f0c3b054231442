// Port of src/ch2/scatter.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/scatter.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'gloo' });
  // the original notes nccl has no scatter; cmesh's CPU backend has every collective
  const rank = dist.getRank();

  const output = new Float32Array(1); // torch.zeros(1)
  console.log(`before rank ${rank}: ${new Shaped(output)}\n`);

  if (rank === 0) {
    const inputs = Float32Array.from([10.0, 20.0, 30.0, 40.0]);
    // torch.split(inputs, 1): (tensor([10]), tensor([20]), tensor([30]), tensor([40])), views
    const scatterList = [0, 1, 2, 3].map((i) => inputs.subarray(i, i + 1));
    await dist.scatter(output, { scatterList, src: 0 });
  } else {
    await dist.scatter(output, { src: 0 });
  }

  console.log(`after rank ${rank}: ${new Shaped(output)}\n`);
  await dist.destroyProcessGroup();
});
