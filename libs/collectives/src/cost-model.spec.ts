import { ALGORITHMS } from './algorithms';
import { availableParallelism } from 'os';
import { MEASURED_DEFAULTS, SHM_MEASURED_DEFAULTS, algorithmFromEnv, calibrate, chooseAlgorithm, estimateCost, getCostParams } from './cost-model';
import { InvalidArgumentError } from './errors';

afterEach(() => {
  calibrate(MEASURED_DEFAULTS.alpha, MEASURED_DEFAULTS.beta, MEASURED_DEFAULTS.gamma);
  calibrate(SHM_MEASURED_DEFAULTS.alpha, SHM_MEASURED_DEFAULTS.beta, SHM_MEASURED_DEFAULTS.gamma, 'shm');
});

describe('cost model', () => {
  it('shared memory has its own parameters, calibrated apart from TCP', () => {
    expect(getCostParams('shm')).toMatchObject({ alpha: SHM_MEASURED_DEFAULTS.alpha, beta: SHM_MEASURED_DEFAULTS.beta });
    expect(SHM_MEASURED_DEFAULTS.beta).toBeLessThan(MEASURED_DEFAULTS.beta);
    const env = {};
    const big = 64 << 20;
    expect(chooseAlgorithm('allReduce', big, 8, { env })).toBe('ring');
    calibrate(1, 1e-12, 0, 'shm'); // huge latency on shm only: fewest messages wins there
    expect(chooseAlgorithm('allReduce', big, 8, { env, transport: 'shm' })).not.toBe('ring');
    expect(chooseAlgorithm('allReduce', big, 8, { env })).toBe('ring');
    expect(getCostParams()).toMatchObject({ alpha: MEASURED_DEFAULTS.alpha });
  });

  it('every registered algorithm carries its own name, description and a cost formula', () => {
    for (const algos of Object.values(ALGORITHMS)) {
      for (const [name, a] of Object.entries(algos)) {
        expect(a.name).toBe(name);
        expect(a.description.length).toBeGreaterThan(0);
        expect(Number.isFinite(a.cost(1 << 20, 4, MEASURED_DEFAULTS))).toBe(true);
      }
    }
  });

  it('follows the seed: master-worker is worst for large buffers, ring beats it, costs grow with size', () => {
    const env = {};
    for (const P of [3, 4, 8]) {
      const big = 64 << 20;
      expect(estimateCost('allReduce', 'ring', big, P)).toBeLessThan(estimateCost('allReduce', 'direct', big, P));
      expect(estimateCost('allReduce', 'ring', big, P)).toBeLessThan(estimateCost('allReduce', 'tree', big, P));
      expect(chooseAlgorithm('allReduce', big, P, { env })).not.toBe('direct');
      expect(estimateCost('allReduce', 'ring', 2 * big, P)).toBeGreaterThan(estimateCost('allReduce', 'ring', big, P));
    }
    // latency-bound: few rounds win
    expect(chooseAlgorithm('broadcast', 8, 8, { env })).toBe('binomial');
    expect(chooseAlgorithm('allGather', 8, 8, { env })).toBe('bruck');
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
    expect(chooseAlgorithm('allReduce', 1 << 20, 8, { env: {} })).toBe('recursive-doubling');
    expect(() => calibrate(-1, 0, 0)).toThrow(InvalidArgumentError);
    expect(() => calibrate(1, NaN, 0)).toThrow(/beta/);
  });

  it('an explicit algorithm or CMESH_ALGO forces the choice', () => {
    expect(chooseAlgorithm('allReduce', 1 << 30, 8, { algorithm: 'direct', env: { CMESH_ALGO: 'ring' } })).toBe('direct');
    expect(chooseAlgorithm('allReduce', 8, 8, { env: { CMESH_ALGO: 'tree' } })).toBe('tree');
    // a plain name applies where it exists; others keep the model
    expect(chooseAlgorithm('allGather', 8, 8, { env: { CMESH_ALGO: 'ring' } })).toBe('ring');
    expect(chooseAlgorithm('broadcast', 8, 8, { env: { CMESH_ALGO: 'ring' } })).toBe('binomial');
    expect(algorithmFromEnv('broadcast', 'allreduce:tree, broadcast:chain')).toBe('chain');
    expect(algorithmFromEnv('allReduce', 'allreduce:tree,broadcast:chain')).toBe('tree');
    // the collective may be spelled as the API does, or in any case with _ or - (all_reduce)
    expect(algorithmFromEnv('allReduce', 'allReduce:ring')).toBe('ring');
    expect(algorithmFromEnv('reduceScatter', 'reduce_scatter:halving')).toBe('halving');
    expect(algorithmFromEnv('allReduce', undefined)).toBeUndefined();
  });

  it('groups spanning hosts with several ranks each pick hierarchical all-reduce and all-gather for large buffers; one host never does', () => {
    const env = {};
    const twoByTwo = { hosts: 2, perHost: 2, uniform: true, intra: 'shm' as const };
    for (const bytes of [1 << 20, 16 << 20, 256 << 20]) {
      expect(chooseAlgorithm('allReduce', bytes, 4, { env, hosts: twoByTwo })).toBe('hierarchical');
      expect(chooseAlgorithm('allReduce', bytes, 8, { env, hosts: { ...twoByTwo, perHost: 4 } })).toBe('hierarchical');
      expect(chooseAlgorithm('allReduce', bytes, 4, { env })).not.toBe('hierarchical');
      expect(chooseAlgorithm('allReduce', bytes, 4, { env, transport: 'shm' })).not.toBe('hierarchical');
      // one rank per host: nothing to combine first
      expect(chooseAlgorithm('allReduce', bytes, 4, { env, hosts: { ...twoByTwo, hosts: 4, perHost: 1 } })).not.toBe('hierarchical');
    }
    // latency-bound: fewer rounds win
    expect(chooseAlgorithm('allReduce', 8, 4, { env, hosts: twoByTwo })).toBe('recursive-doubling');
    // the slower the link between hosts, the more it pays
    const big = 64 << 20;
    const flat = estimateCost('allReduce', 'ring', big, 4, {}, twoByTwo);
    const hier = estimateCost('allReduce', 'hierarchical', big, 4, {}, twoByTwo);
    const slowFlat = estimateCost('allReduce', 'ring', big, 4, { beta: 8e-9 }, twoByTwo);
    const slowHier = estimateCost('allReduce', 'hierarchical', big, 4, { beta: 8e-9 }, twoByTwo);
    expect(slowFlat / slowHier).toBeGreaterThan(flat / hier);
    expect(slowFlat / slowHier).toBeGreaterThan(1.4);
    expect(chooseAlgorithm('allReduce', 8, 4, { env: { CMESH_ALGO: 'hierarchical' } })).toBe('hierarchical');
    // all-gather likewise: only each rank's own block crosses to the other host
    expect(chooseAlgorithm('allGather', 1 << 20, 4, { env, hosts: twoByTwo })).toBe('hierarchical');
    expect(chooseAlgorithm('allGather', 1 << 20, 4, { env })).not.toBe('hierarchical');
    expect(chooseAlgorithm('allGather', 8, 4, { env, hosts: twoByTwo })).toBe('bruck');
  });

  it('unknown names are InvalidArgumentErrors listing the valid ones', () => {
    expect(() => chooseAlgorithm('allReduce', 8, 2, { algorithm: 'butterfly' })).toThrow(
      /unknown allReduce algorithm "butterfly".*valid: direct, ring, tree, halving-doubling/,
    );
    expect(() => chooseAlgorithm('allReduce', 8, 2, { env: { CMESH_ALGO: 'butterfly' } })).toThrow(InvalidArgumentError);
    expect(() => chooseAlgorithm('allReduce', 8, 2, { env: { CMESH_ALGO: 'allreduce:chain' } })).toThrow(/valid: direct, ring/);
    expect(() => chooseAlgorithm('allReduce', 8, 2, { env: { CMESH_ALGO: 'sideways:ring' } })).toThrow(/unknown collective/);
    expect(() => chooseAlgorithm('bogus' as never, 8, 2)).toThrow(InvalidArgumentError);
  });
});
