// Port of src/ch2/p2p_communication_non_blocking.py (large-scale-lm-tutorials; the same code appears in "Parameter Server and All-Reduce").
// Run: cmesh run --nproc-per-node 2 examples/p2p_communication_non_blocking.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { randn } from './_lib/random';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'gloo' });

  let tensor: Float32Array;
  let request: dist.Work<unknown>;
  if (dist.getRank() === 0) {
    tensor = randn(4); // torch.randn(2, 2)
    request = dist.isend(tensor, { dst: 1 });
  } else if (dist.getRank() === 1) {
    tensor = new Float32Array(4); // torch.zeros(2, 2)
    request = dist.irecv(tensor, { src: 0 });
  } else {
    throw new Error('wrong rank');
  }

  await request.wait();

  console.log(`rank ${dist.getRank()}: ${new Shaped(tensor, [2, 2])}`);
  await dist.destroyProcessGroup();
});
