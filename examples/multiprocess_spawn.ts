// Port of multiprocess_spawn.py ("Parameter Server and All-Reduce"): spawn 4
// subprocesses, each initializes the process group and prints the default group.
// Run: node -r @swc-node/register examples/multiprocess_spawn.ts
// The original uses nccl; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

// 각 subprocess에서 실행될 내용
async function worker(rank: number, worldSize: number): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp', rank, worldSize });
  const group = dist.GroupMember.WORLD; // torch: _get_default_group(), the same object as dist.group.WORLD
  // 원하는 랭크만 새로운 그룹으로 묶기
  // const group = await dist.newGroup([...Array(worldSize).keys()]);
  // const group = await dist.newGroup([0, 1]);
  console.log(`${group} - rank: ${rank}`);
  await dist.destroyProcessGroup();
}

// Mainprocess에서 실행될 내용
runMain(async () => {
  const worldSize = 4;
  process.env.MASTER_ADDR = '127.0.0.1';
  // the original hard-codes 32900; an already-set MASTER_PORT wins so tests can use a free port
  process.env.MASTER_PORT ??= '32900';
  process.env.WORLD_SIZE = String(worldSize);

  await dist.spawn(worker, { args: [worldSize], nprocs: worldSize });
});
