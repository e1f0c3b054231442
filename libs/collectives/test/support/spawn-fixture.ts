// A script using spawn() the way the seeds use mp.spawn (run by launch.test.ts). Like Python's
// spawn start method, the children re-run this file; spawn() then runs the worker instead.
import * as dist from '../../src';

async function worker(rank: number, worldSize: number, port: number, arg: string) {
  await dist.initProcessGroup({ initMethod: `tcp://127.0.0.1:${port}`, rank, worldSize, timeout: 20000 });
  const t = new Float32Array([1]);
  await dist.allReduce(t);
  console.log(`rank ${rank} of ${worldSize} arg=${arg} sum=${t[0]}`);
  await dist.destroyProcessGroup();
}

async function failing(rank: number) {
  if (rank === 1) process.exit(3);
  await new Promise((r) => setTimeout(r, rank === 2 ? 20000 : 0));
  console.log(`rank ${rank} finished`);
}

function report(e: dist.ProcessExitedError) {
  console.log(`parent caught ${e.name}: ${e.message} rank=${e.failedRank} code=${e.exitCode} signal=${e.signal}`);
}

async function main(mode: string) {
  if (mode === 'ok') {
    await dist.spawn(worker, { nprocs: 3, args: [3, await dist.freePort(), 'hi'] });
    console.log('parent: all joined');
  } else if (mode === 'fail') {
    await dist.spawn(failing, { nprocs: 3 }).catch(report);
  } else if (mode === 'nojoin') {
    const ctx = await dist.spawn(
      async (rank: number, tag: string) => {
        console.log(`child ${rank} pid ${process.pid} tag=${tag} spawned=${dist.isSpawnedChild()} marker=${process.env.CMESH_SPAWN_RANK ?? 'none'}`);
      },
      { nprocs: 2, args: ['t'], join: false },
    );
    console.log(`parent pids ${ctx.pids.join(',')}`);
    await ctx.join();
    console.log('parent: joined');
  } else if (mode === 'signal') {
    await dist
      .spawn(
        async (rank: number) => {
          if (rank === 0) process.kill(process.pid, 'SIGKILL');
          await new Promise((r) => setTimeout(r, 20000));
        },
        { nprocs: 2 },
      )
      .catch(report);
  } else if (mode === 'throw') {
    await dist
      .spawn(
        async (rank: number) => {
          if (rank === 1) throw new Error('boom from rank 1');
        },
        { nprocs: 2 },
      )
      .catch(report);
  }
}

void main(process.argv[2]);
