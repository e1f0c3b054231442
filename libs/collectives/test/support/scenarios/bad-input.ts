// Bad input gets a typed error naming what is wrong and changes no state: the collectives that
// follow the errors still line up on every rank.
import * as dist from '../../../src';

async function error(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return 'no error';
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
}

export async function run(): Promise<Record<string, string | number[]>> {
  const out: Record<string, string | number[]> = {};
  out.beforeInit = await error(() => dist.allReduce(new Float32Array(1)));
  out.getRankBeforeInit = await error(() => dist.getRank());
  await dist.initProcessGroup({ timeout: 20000 });
  const P = dist.getWorldSize();
  out.doubleInit = await error(() => dist.initProcessGroup());
  out.bitwiseOnFloat = await error(() => dist.allReduce(new Float32Array(2), { op: dist.ReduceOp.BAND }));
  out.avgOnInt = await error(() => dist.allReduce(new Int32Array(2), { op: dist.ReduceOp.AVG }));
  out.notATensor = await error(() => dist.allReduce([1, 2] as never));
  out.uint16 = await error(() => dist.allReduce(new Uint16Array(2) as never));
  out.srcOutOfRange = await error(() => dist.broadcast(new Float32Array(1), { src: P }));
  out.dstNegative = await error(() => dist.reduce(new Float32Array(1), { dst: -1 }));
  out.wrongListLength = await error(() => dist.allGather([new Float32Array(1)], new Float32Array(1)));
  out.lengthMismatch = await error(() =>
    dist.allGather(
      Array.from({ length: P }, () => new Float32Array(2)),
      new Float32Array(3),
    ),
  );
  out.dtypeMismatch = await error(() => dist.allGatherIntoTensor(new Float64Array(P), new Float32Array(1)));
  out.badSplits = await error(() => dist.allToAllSingle(new Float32Array(4), new Float32Array(4), { inputSplitSizes: [1, 1] }));
  out.gatherListOnNonDst =
    dist.getRank() === 1 ? await error(() => dist.gather(new Float32Array(1), { dst: 0, gatherList: [new Float32Array(1)] })) : 'skipped';
  out.sendToSelf = await error(() => dist.send(new Float32Array(1), { dst: dist.getRank() }));
  out.badTimeout = await error(() => dist.barrier({ timeout: -5 }));
  out.badGroup = await error(() => dist.newGroup([0, P]));
  out.badGroupTimeout = await error(() => dist.newGroup([0, 1], { timeout: -5 }));
  out.asyncBadInputThrows = await error(() => dist.allReduce(new Float32Array(1), { asyncOp: true, op: 'nope' as never }));
  // state unchanged: the same sequence of collectives still works everywhere
  const t = new Float32Array([dist.getRank() + 1]);
  await dist.allReduce(t);
  out.after = [t[0]];
  await dist.destroyProcessGroup();
  out.afterDestroy = await error(() => dist.barrier());
  return out;
}
