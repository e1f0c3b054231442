import { JobRecord } from '@cmesh/protocol';
import { jobBucket } from '@cmesh/collectives';
import { STORE_ORPHAN_MS, STORE_SWEEP_MS, bucketUnneeded, jobOfStream, jobStorePrefix } from './job-buckets';

const rec = (state: JobRecord['state']) => ({ state }) as JobRecord;

describe('job store buckets', () => {
  it('knows a job store bucket by its stream name', () => {
    expect(jobOfStream(`KV_${jobBucket(jobStorePrefix('jabc123'))}`)).toBe('jabc123');
    expect(jobOfStream(`KV_${jobBucket(jobStorePrefix('not-a-job'))}`)).toBeNull();
    expect(jobOfStream('KV_cmesh_jobs')).toBeNull();
  });

  it('drops a finished job\'s bucket after a sweep period, one without a record after STORE_ORPHAN_MS', () => {
    expect(bucketUnneeded(rec('succeeded'), STORE_SWEEP_MS)).toBe(false);
    expect(bucketUnneeded(rec('failed'), STORE_SWEEP_MS + 1)).toBe(true);
    expect(bucketUnneeded(rec('running'), STORE_ORPHAN_MS * 10)).toBe(false); // another replica's job
    expect(bucketUnneeded(null, STORE_ORPHAN_MS)).toBe(false);
    expect(bucketUnneeded(null, STORE_ORPHAN_MS + 1)).toBe(true);
  });
});
