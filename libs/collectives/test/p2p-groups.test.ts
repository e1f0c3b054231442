import { runRanks } from './support/ranks';

describe('point-to-point, async work and groups (world 4)', () => {
  it('delivers every message where and as torch does', async () => {
    const results = await runRanks('p2p-groups', 4, { timeoutMs: 60000 });
    const r = results.map((x) => {
      expect({ code: x.code, stderr: x.stderr }).toEqual({ code: 0, stderr: '' });
      return x.result;
    });
    for (let k = 0; k < 4; k++) {
      const from = (k + 3) % 4;
      expect(r[k].ring).toEqual([from * 10, from]);
      expect(r[k].ringFrom).toBe(from);
      expect(r[k].async).toEqual([
        [6, 6, 6, 6],
        [4, 4],
      ]);
    }
    expect(r[1].tags).toEqual([2, 1]);
    expect(r[0].anySource).toEqual([1, 2, 3]);
    expect(r[2].irecv).toEqual({ data: [9, 8, 7], from: 3, completed: true, exception: null });
    expect(r[0].groupRanks).toEqual([0, 2, -1, -1]);
    expect(r[1].groupRanks).toEqual([-1, -1, 0, 3]);
    expect(r[2].groupRanks).toEqual([1, 2, 1, 3]);
    expect(r[3].groupRanks).toEqual([-1, -1, 2, 3]);
    // [0,2] sums 1+3; [1,2,3] multiplies 2*3*4; broadcast from 2 in [1,2,3]; non-members unchanged
    expect(r[0].groupResults).toEqual([4, 1, 0]);
    expect(r[1].groupResults).toEqual([2, 24, 42]);
    expect(r[2].groupResults).toEqual([4, 24, 42]);
    expect(r[3].groupResults).toEqual([4, 24, 42]);
  }, 70000);
});

describe('bad input', () => {
  it('gets typed errors that name the problem and changes no state', async () => {
    const results = await runRanks('bad-input', 2, { timeoutMs: 60000 });
    for (const x of results) {
      expect(x.code).toBe(0);
      const o = x.result;
      expect(o.beforeInit).toMatch(/^NotInitializedError: .*initProcessGroup/);
      expect(o.getRankBeforeInit).toMatch(/^NotInitializedError/);
      expect(o.doubleInit).toMatch(/^InvalidArgumentError: .*already initialized/);
      expect(o.bitwiseOnFloat).toMatch(/^InvalidArgumentError: .*float32/);
      expect(o.avgOnInt).toMatch(/^InvalidArgumentError: .*int32/);
      expect(o.notATensor).toMatch(/^InvalidArgumentError: .*tensor/);
      expect(o.uint16).toMatch(/^InvalidArgumentError: .*Uint16Array/);
      expect(o.srcOutOfRange).toMatch(/^InvalidArgumentError: .*src rank 2 is not in group/);
      expect(o.dstNegative).toMatch(/^InvalidArgumentError: .*dst rank -1/);
      expect(o.wrongListLength).toMatch(/^InvalidArgumentError: .*one tensor per rank of the group \(2\), got 1/);
      expect(o.lengthMismatch).toMatch(/^InvalidArgumentError: .*tensorList\[0\] has 2 elements, expected 3/);
      expect(o.dtypeMismatch).toMatch(/^InvalidArgumentError: .*output has dtype float64 but the input is float32/);
      expect(o.badSplits).toMatch(/^InvalidArgumentError: .*inputSplitSizes/);
      expect(o.sendToSelf).toMatch(/^InvalidArgumentError: .*yourself/);
      expect(o.badTimeout).toMatch(/^InvalidArgumentError: .*timeout/);
      expect(o.badGroup).toMatch(/^InvalidArgumentError: .*rank 2 is out of range/);
      expect(o.badGroupTimeout).toMatch(/^InvalidArgumentError: newGroup: timeout must be a positive number/);
      expect(o.asyncBadInputThrows).toMatch(/^InvalidArgumentError/);
      expect(o.after).toEqual([3]);
      expect(o.afterDestroy).toMatch(/^NotInitializedError/);
    }
    expect(results[1].result.gatherListOnNonDst).toMatch(/^InvalidArgumentError: .*gatherList must NOT be specified/);
  }, 70000);
});
