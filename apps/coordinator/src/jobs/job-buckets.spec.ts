import { JobRecord, clusterNames } from '@cmesh/protocol';
import { STORE_ORPHAN_MS, STORE_SWEEP_MS, bucketUnneeded, jobOfStream, jobStream } from './job-buckets';

const rec = (state: JobRecord['state']) => ({ state }) as JobRecord;
const sid = '0123456789abcdef0123456789abcdef';

describe('job store buckets', () => {
  it("knows its cluster's job store buckets by their stream names, and no other cluster's", () => {
    const def = clusterNames();
    const lab = clusterNames('lab');
    expect(jobStream(def, 'jabc123', sid)).toBe(`KV_cmesh_store_jobs_jabc123-${sid}`);
    expect(jobStream(lab, 'jabc123', sid)).toBe(`KV_cmesh_lab_store_jobs_jabc123-${sid}`);
    expect(jobOfStream(def, jobStream(def, 'jabc123', sid))).toBe('jabc123');
    expect(jobOfStream(lab, jobStream(lab, 'jabc123', sid))).toBe('jabc123');
    expect(jobOfStream(def, jobStream(lab, 'jabc123', sid))).toBeNull();
    expect(jobOfStream(lab, jobStream(def, 'jabc123', sid))).toBeNull();
    expect(jobOfStream(lab, jobStream(clusterNames('lab-2'), 'jabc123', sid))).toBeNull();
    expect(jobOfStream(def, jobStream(def, 'not-a-job', sid))).toBeNull();
    expect(jobOfStream(def, `KV_${def.stores.bucket('jobs', 'jabc123')}`)).toBeNull(); // no random part
    expect(jobOfStream(def, `KV_${def.stores.bucket('svc', `jabc123-${sid}`)}`)).toBeNull();
    expect(jobOfStream(def, 'KV_cmesh_jobs')).toBeNull();
  });

  it("drops a finished job's bucket after a sweep period, one without a record after STORE_ORPHAN_MS", () => {
    expect(bucketUnneeded(rec('succeeded'), STORE_SWEEP_MS)).toBe(false);
    expect(bucketUnneeded(rec('failed'), STORE_SWEEP_MS + 1)).toBe(true);
    expect(bucketUnneeded(rec('running'), STORE_ORPHAN_MS * 10)).toBe(false); // another replica's job
    expect(bucketUnneeded(null, STORE_ORPHAN_MS)).toBe(false);
    expect(bucketUnneeded(null, STORE_ORPHAN_MS + 1)).toBe(true);
  });
});
