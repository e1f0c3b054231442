// The sidecar's C++ unit tests (framing, request validation, error replies, and the server over the
// CPU simulation of CUDA and NCCL; native/nccl-sidecar/tests) run under jest, so `make test` fails
// when they do.
import { spawnSync } from 'child_process';

import { buildSidecar } from '@cmesh/testing';
import { SIDECAR_BUILD_DIR } from '../src/backends/nccl';

describe('nccl sidecar C++ unit tests (ctest)', () => {
  it('builds the sidecar and its tests, and every ctest passes', () => {
    buildSidecar();
    const r = spawnSync('ctest', ['--test-dir', SIDECAR_BUILD_DIR, '--output-on-failure', '--timeout', '120'], {
      encoding: 'utf8',
      timeout: 300_000,
    });
    const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`ctest exited ${r.status}:\n${output}`);
    expect(output).toContain('100% tests passed');
    expect(output).toMatch(/protocol[ .]+Passed/);
    expect(output).toMatch(/framing[ .]+Passed/);
    expect(output).toMatch(/server[ .]+Passed/);
    expect(output).toMatch(/sim[ .]+Passed/);
  }, 600_000);
});
