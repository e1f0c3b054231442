// Port of src/ch2/multi_process_2.py (large-scale-lm-tutorials; the same in its notebook version): torch.multiprocessing.spawn.
// Run: node -r @swc-node/register examples/multi_process_2.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';

// 서브프로세스에서 동시에 실행되는 영역
function fn(rank: number, param1: string, param2: string): void {
  // rank는 기본적으로 들어옴. param1, param2는 spawn시에 입력됨.
  console.log(`${param1} ${param2} - rank: ${rank}`);
}

// 메인 프로세스
runMain(async () => {
  await dist.spawn(fn, {
    args: ['A0', 'B1'],
    nprocs: 4, // 만들 프로세스 개수
    join: true, // 프로세스 join 여부
  });
});
