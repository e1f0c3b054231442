// Port of src/ch2/process_group_3.py (large-scale-lm-tutorials; the same in its notebook version): spawn 4 subprocesses,
// each initializes the process group and creates a group of every rank.
// Run: node -r @swc-node/register examples/process_group_3.ts
// The original uses nccl; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

// 서브프로세스에서 동시에 실행되는 영역
async function fn(rank: number, worldSize: number): Promise<void> {
  // rank는 기본적으로 들어옴. world_size는 입력됨.
  await dist.initProcessGroup({ backend: 'tcp', rank, worldSize });
  const group = await dist.newGroup([...Array(worldSize).keys()]);
  console.log(`${group} - rank: ${rank}`);
  await dist.destroyProcessGroup();
}

// 메인 프로세스
runMain(async () => {
  process.env.MASTER_ADDR = 'localhost';
  // the original hard-codes 29500; an already-set MASTER_PORT wins so tests can use a free port
  process.env.MASTER_PORT ??= '29500';
  process.env.WORLD_SIZE = '4';

  await dist.spawn(fn, {
    args: [4], // world_size 입력
    nprocs: 4, // 만들 프로세스 개수
    join: true, // 프로세스 join 여부
  });
});
