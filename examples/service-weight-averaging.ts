// Collectives as a service: several small services average a model's weights through the mesh
// each step, without a launcher, open ports or a GPU library. Each copy joins group `weights` of
// SIZE members, takes a local step on its own data, and all-reduces the weights with AVG; at the
// end every copy holds the same weights, which it checks against rank 0's.
//
//   npx cmesh up --agents 4 --no-auth            # a local mesh (NATS on 4222)
//   for i in 0 1 2 3; do NATS_URL=nats://127.0.0.1:4222 SIZE=4 \
//     node -r @swc-node/register examples/service-weight-averaging.ts & done; wait
import { connectMesh } from '@cmesh/client';

const PARAMS = 10_000;
const STEPS = Number(process.env.STEPS ?? 5);

async function main(): Promise<void> {
  const mesh = await connectMesh({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
  const group = await mesh.join(process.env.GROUP ?? 'weights', { size: Number(process.env.SIZE ?? 4), label: `trainer-${process.pid}` });
  const { rank, size } = group;
  console.log(`rank ${rank} of ${size}: joined`);
  const weights = new Float32Array(PARAMS).fill(1);
  for (let step = 0; step < STEPS; step++) {
    // a local step on this service's own data: a gradient that differs per rank
    for (let i = 0; i < PARAMS; i++) weights[i] -= 0.01 * ((rank + 1) * ((i % 13) - 6));
    await group.allReduce(weights, { op: 'avg', timeout: 30_000 });
    console.log(`rank ${rank}: step ${step} weights[0..3] = ${Array.from(weights.subarray(0, 4), (w) => w.toFixed(4)).join(', ')}`);
  }
  // everyone must hold rank 0's weights, bit for bit
  const reference = weights.slice();
  await group.broadcast(reference, { src: 0 });
  const differing = weights.findIndex((w, i) => w !== reference[i]);
  console.log(differing < 0 ? `rank ${rank}: weights identical on all ${size} members` : `rank ${rank}: weight ${differing} differs from rank 0's`);
  await group.leave();
  await mesh.close();
  if (differing >= 0) process.exit(1);
}

main().catch((e: Error) => {
  console.error(`${e.name}: ${e.message}`);
  process.exit(1);
});
