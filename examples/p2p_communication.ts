// Port of src/ch2/p2p_communication.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 2 examples/p2p_communication.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { randn } from './_lib/random';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'gloo' });

  if (dist.getRank() === 0) {
    const tensor = randn(4); // torch.randn(2, 2)
    await dist.send(tensor, { dst: 1 });
  } else if (dist.getRank() === 1) {
    const tensor = new Float32Array(4); // torch.zeros(2, 2)
    console.log(`rank 1 before: ${new Shaped(tensor, [2, 2])}\n`);
    await dist.recv(tensor, { src: 0 });
    console.log(`rank 1 after: ${new Shaped(tensor, [2, 2])}\n`);
  } else {
    throw new Error('wrong rank');
  }
  await dist.destroyProcessGroup();
});
