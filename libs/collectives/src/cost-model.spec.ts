import { ALGORITHMS } from './algorithms';
import { availableParallelism } from 'os';
import { COST_FORMULAS, MEASURED_DEFAULTS, algorithmFromEnv, calibrate, chooseAlgorithm, estimateCost, getCostParams } from './cost-model';
import { InvalidArgumentError } from './errors';

afterEach(() => calibrate(MEASURED_DEFAULTS.alpha, MEASURED_DEFAULTS.beta, MEASURED_DEFAULTS.gamma));

describe('cost model', () => {
  it('has a formula for every registered algorithm and nothing else', () => {
    for (const [kind, algos] of Object.entries(ALGORITHMS)) {
      expect(Object.keys(COST_FORMULAS[kind as keyof typeof COST_FORMULAS]).sort()).toEqual(Object.keys(algos).sort());
    }
  });

  it('follows the seed: master-worker is worst for large buffers, ring beats it, costs grow with size', () => {
    const env = {};
    for (const P of [3, 4, 8]) {
      const big = 64 << 20;
      expect(estimateCost('allreduce', 'ring', big, P)).toBeLessThan(estimateCost('allreduce', 'direct', big, P));
      expect(estimateCost('allreduce', 'ring', big, P)).toBeLessThan(estimateCost('allreduce', 'tree', big, P));
      expect(chooseAlgorithm('allreduce', big, P, { env })).not.toBe('direct');
      expect(estimateCost('allreduce', 'ring', 2 * big, P)).toBeGreaterThan(estimateCost('allreduce', 'ring', big, P));
    }
    // latency-bound: few rounds win
    expect(chooseAlgorithm('broadcast', 8, 8, { env })).toBe('binomial');
    expect(chooseAlgorithm('allgather', 8, 8, { env })).toBe('bruck');
    // bandwidth-bound, many ranks: the pipelined chain wins over the binomial tree
    expect(chooseAlgorithm('broadcast', 256 << 20, 8, { env })).toBe('chain');
    // unless the ranks take turns on the cores
    expect(chooseAlgorithm('broadcast', 256 << 20, 8, { env: { LOCAL_WORLD_SIZE: '8' } })).toBe(availableParallelism() >= 8 ? 'chain' : 'binomial');
    expect(chooseAlgorithm('broadcast', 256 << 20, 8, { env, oversubscribed: true })).toBe('binomial');
    expect(chooseAlgorithm('broadcast', 256 << 20, 8, { env: { CMESH_ALGO: 'chain' }, oversubscribed: true })).toBe('chain');
  });

  it('calibrate changes the choice; bad values are rejected', () => {
    calibrate(1, 1e-12, 0); // huge latency: fewest messages wins
    expect(getCostParams().alpha).toBe(1);
    expect(chooseAlgorithm('allreduce', 1 << 20, 8, { env: {} })).toBe('recursive-doubling');
    expect(() => calibrate(-1, 0, 0)).toThrow(InvalidArgumentError);
    expect(() => calibrate(1, NaN, 0)).toThrow(/beta/);
  });

  it('an explicit algorithm or CMESH_ALGO forces the choice', () => {
    expect(chooseAlgorithm('allreduce', 1 << 30, 8, { algorithm: 'direct', env: { CMESH_ALGO: 'ring' } })).toBe('direct');
    expect(chooseAlgorithm('allreduce', 8, 8, { env: { CMESH_ALGO: 'tree' } })).toBe('tree');
    // a plain name applies where it exists; others keep the model
    expect(chooseAlgorithm('allgather', 8, 8, { env: { CMESH_ALGO: 'ring' } })).toBe('ring');
    expect(chooseAlgorithm('broadcast', 8, 8, { env: { CMESH_ALGO: 'ring' } })).toBe('binomial');
    expect(algorithmFromEnv('broadcast', 'allreduce:tree, broadcast:chain')).toBe('chain');
    expect(algorithmFromEnv('allreduce', 'allreduce:tree,broadcast:chain')).toBe('tree');
    expect(algorithmFromEnv('allreduce', undefined)).toBeUndefined();
  });

  it('unknown names are InvalidArgumentErrors listing the valid ones', () => {
    expect(() => chooseAlgorithm('allreduce', 8, 2, { algorithm: 'butterfly' })).toThrow(
      /unknown allreduce algorithm "butterfly".*valid: direct, ring, tree, halving-doubling/,
    );
    expect(() => chooseAlgorithm('allreduce', 8, 2, { env: { CMESH_ALGO: 'butterfly' } })).toThrow(InvalidArgumentError);
    expect(() => chooseAlgorithm('allreduce', 8, 2, { env: { CMESH_ALGO: 'allreduce:chain' } })).toThrow(/valid: direct, ring/);
    expect(() => chooseAlgorithm('allreduce', 8, 2, { env: { CMESH_ALGO: 'sideways:ring' } })).toThrow(/unknown collective/);
    expect(() => chooseAlgorithm('bogus' as never, 8, 2)).toThrow(InvalidArgumentError);
  });
});
