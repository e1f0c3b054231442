import { isAlive, sampleValue, startPrometheus } from '../src';

it('starts a real Prometheus that scrapes, answers queries and reloads jobs, and stops it by pid', async () => {
  const prom = await startPrometheus({ interval: '1s' });
  try {
    // it scrapes itself once told to: the reload path and the query path together
    await prom.setJobs([{ job: 'self', targets: [`127.0.0.1:${prom.port}`], labels: { role: 'fixture' } }]);
    const up = await prom.waitFor('up{job="self"} == 1', 15_000);
    expect(up).toHaveLength(1);
    expect(up[0].metric).toMatchObject({ job: 'self', role: 'fixture', instance: `127.0.0.1:${prom.port}` });
    expect(sampleValue(up[0])).toBe(1);
    expect(sampleValue((await prom.query('1 + 2'))[0])).toBe(3);
    await expect(prom.query('sum(')).rejects.toThrow(/bad_data/);
    expect((await prom.targets()).map((t) => [t.job, t.health])).toEqual([['self', 'up']]);
  } finally {
    await prom.stop();
  }
  expect(isAlive(prom.pid)).toBe(false);
}, 40_000);
