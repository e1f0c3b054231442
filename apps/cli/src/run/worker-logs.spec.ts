import { parseLocalRanksFilter, parseStd, stdFor } from './worker-logs';

describe("torchrun's --redirects / --tee values", () => {
  it('takes one value for every local rank or local_rank:value pairs', () => {
    expect(parseStd('--tee', '3')).toBe(3);
    const perRank = parseStd('--redirects', '0:1,2:3');
    expect([0, 1, 2].map((r) => stdFor(perRank, r))).toEqual([1, 0, 3]);
    expect([0, 5].map((r) => stdFor(2, r))).toEqual([2, 2]);
    expect(stdFor(undefined, 0)).toBe(0);
  });

  it('rejects anything else, naming the flag', () => {
    expect(() => parseStd('--tee', '4')).toThrow(/--tee must be 0-3 .* got "4"/);
    expect(() => parseStd('--redirects', '0:1,')).toThrow(/--redirects must be/);
    expect(() => parseStd('--redirects', '1:1,1:2')).toThrow(/local rank 1 given twice/);
  });

  it('parses --local-ranks-filter', () => {
    expect([...parseLocalRanksFilter('0,2')]).toEqual([0, 2]);
    expect(() => parseLocalRanksFilter('0,x')).toThrow(/--local-ranks-filter must be local ranks/);
  });
});
