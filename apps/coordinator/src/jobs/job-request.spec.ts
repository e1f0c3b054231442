import { JobRequestSchema } from '@cmesh/protocol';
import { checkRoot, sweepOf } from './job-request';

const req = (body: Record<string, unknown>) => JobRequestSchema.parse({ op: 'allReduce', ...body });

describe('job request', () => {
  it('makes the sweep the members run from the request, sizes expanded', () => {
    expect(sweepOf(req({ minBytes: 8, maxBytes: 32, algorithm: 'ring' }))).toMatchObject({
      op: 'allReduce',
      sizes: [8, 16, 32],
      dtype: 'float32',
      algorithm: 'ring',
    });
    expect(sweepOf(req({ sizes: [8] }))).not.toHaveProperty('algorithm');
  });

  it('refuses avg of an integer type and a root outside the members', () => {
    expect(() => sweepOf(req({ redop: 'avg', dtype: 'int32' }))).toThrow('invalid job: redop avg needs a floating-point dtype, got int32');
    expect(() => checkRoot(req({ op: 'broadcast', root: 2 }), 2)).toThrow('root 2 is not a rank of 2 agents');
    expect(() => checkRoot(req({ op: 'broadcast', root: 1 }), 2)).not.toThrow();
  });
});
