// Port of src/ch2/process_group_2.py (large-scale-lm-tutorials; the same in its notebook version): the same as
// process_group_1 with the rendezvous variables set, in the main process (one rank only).
// Run: node -r @swc-node/register examples/process_group_2.ts
// The original uses nccl; this runs on the CPU data plane ('tcp').
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

// 일반적으로 이 값들도 환경변수로 등록하고 사용합니다.
process.env.RANK = '0';
process.env.LOCAL_RANK = '0';
process.env.WORLD_SIZE = '1';

// 통신에 필요한 주소를 설정합니다.
process.env.MASTER_ADDR = 'localhost'; // 통신할 주소 (보통 localhost를 씁니다.)
// 통신할 포트 (임의의 값을 설정해도 좋습니다.) The original hard-codes 29500; a MASTER_PORT that is
// already set wins, so tests can run this on a free port.
process.env.MASTER_PORT ??= '29500';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp', rank: 0, worldSize: 1 });
  // 프로세스 그룹 초기화

  const processGroup = await dist.newGroup([0]);
  // 0번 프로세스가 속한 프로세스 그룹 생성

  console.log(`${processGroup}`);
  await dist.destroyProcessGroup();
});
