// Port of torch_nccl_test.py (Chinese: "pytorch 分布式相关api / 集合通信"): the seven
// collective demos run one after another, each fenced by barriers, logging before/after.
// Run: cmesh run --nproc-per-node 2 examples/torch_nccl_test.ts
// The original runs on nccl (torchrun --nproc_per_node 2); this runs on the CPU data plane ('tcp').
// logging.info(...) becomes console.log(...).
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr, Shaped } from './_lib/torch-format';

const { ReduceOp } = dist;

function printRank0(msg: string): void {
  if (dist.getRank() === 0) console.log(msg);
}

async function distScatter(): Promise<void> {
  await dist.barrier();

  const rank = dist.getRank();
  const worldSize = dist.getWorldSize();

  const tensor = new Float32Array(worldSize); // torch.zeros(world_size)
  const beforeTensor = tensor.slice();
  let scatterList: Float32Array[] | undefined;
  if (dist.getRank() === 0) {
    // Assumes world_size of 2.
    // Only tensors, all of which must be the same size.
    const tOnes = new Float32Array(worldSize).fill(1);
    const tFives = new Float32Array(worldSize).fill(5);
    scatterList = [tOnes, tFives];
  }
  await dist.scatter(tensor, { scatterList, src: 0 });
  console.log(`scatter, rank: ${rank}, before scatter: ${new Shaped(beforeTensor)} after scatter: ${new Shaped(tensor)}`);
  await dist.barrier();
}

async function distGather(): Promise<void> {
  await dist.barrier();

  const rank = dist.getRank();
  const worldSize = dist.getWorldSize();

  const tensor = Float32Array.from([rank * 2 + 1]);
  const beforeTensor = tensor.slice();

  const gatherList = rank === 0 ? Array.from({ length: worldSize }, () => new Float32Array(1)) : undefined;

  await dist.gather(tensor, { gatherList, dst: 0 });

  console.log(`gather, rank: ${rank}, before gather: ${new Shaped(beforeTensor)} after gather: ${listRepr(gatherList)}`);
  await dist.barrier();
}

async function distBroadcast(): Promise<void> {
  await dist.barrier();

  const rank = dist.getRank();
  const worldSize = dist.getWorldSize();

  const srcRank = 0;
  // torch.tensor(world_size) is a 0-dim int64 tensor; the others hold torch.zeros(1, dtype=torch.int64)
  const tensor = rank === srcRank ? new Shaped(BigInt64Array.from([BigInt(worldSize)]), []) : new Shaped(new BigInt64Array(1));
  const beforeTensor = new Shaped(tensor.data.slice(), tensor.shape);
  await dist.broadcast(tensor.data, { src: srcRank });
  console.log(`broadcast, rank: ${rank}, before broadcast tensor: ${beforeTensor} after broadcast tensor: ${tensor}`);
  await dist.barrier();
}

async function distReduce(): Promise<void> {
  await dist.barrier();

  const rank = dist.getRank();

  const tensor = Float32Array.from([rank * 2 + 1]);
  const beforeTensor = tensor.slice();

  await dist.reduce(tensor, { op: ReduceOp.SUM, dst: 0 });

  console.log(`reduce, rank: ${rank}, before reduce: ${new Shaped(beforeTensor)} after reduce: ${new Shaped(tensor)}`);
  await dist.barrier();
}

async function distAllreduce(): Promise<void> {
  await dist.barrier();

  const rank = dist.getRank();

  const tensor = rank === 0 ? Float32Array.from([1, 2]) : Float32Array.from([2, 3]);
  const inputTensor = tensor.slice();
  await dist.allReduce(tensor);

  console.log(`all_reduce, rank: ${rank}, before allreduce tensor: ${new Shaped(inputTensor)}, after allreduce tensor: ${new Shaped(tensor)}`);
  await dist.barrier();
}

async function distAllgather(): Promise<void> {
  printRank0('allgather:');
  await dist.barrier();

  const rank = dist.getRank();
  const worldSize = dist.getWorldSize();

  const inputTensor = new Shaped(BigInt64Array.from([BigInt(rank)]), []); // torch.tensor(rank), 0-dim
  const tensorList = Array.from({ length: worldSize }, () => new BigInt64Array(1)); // zeros(1, int64)
  await dist.allGather(tensorList, inputTensor.data);
  console.log(`allgather, rank: ${rank}, input_tensor: ${inputTensor}, output tensor_list: ${listRepr(tensorList)}`);
  await dist.barrier();
}

async function distReducescatter(): Promise<void> {
  await dist.barrier();

  const rank = dist.getRank();

  const output = new BigInt64Array(1); // torch.empty(1, dtype=torch.int64)
  // [torch.tensor(rank*2+1), torch.tensor(rank*2+2)]: 0-dim int64 tensors
  const inputList = [BigInt64Array.from([BigInt(rank * 2 + 1)]), BigInt64Array.from([BigInt(rank * 2 + 2)])];
  await dist.reduceScatter(output, inputList, { op: ReduceOp.SUM });
  await dist.barrier();
  console.log(`reduce_scatter, rank: ${rank}, input_list: ${listRepr(inputList, [])}, tensor: ${new Shaped(output)}`);
  await dist.barrier();
}

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  await distScatter();
  await distGather();
  await distBroadcast();
  await distReduce();
  await distAllreduce();
  await distAllgather();
  await distReducescatter();
  await dist.destroyProcessGroup();
});
