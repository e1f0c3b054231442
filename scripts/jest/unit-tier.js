// The unit tier's rule, checked: a *.spec.ts starts no process. Each of child_process's starters
// throws here, naming itself; a test that needs a real process (nats-server, Prometheus, a child
// node) belongs in its package's test/ directory, the integration tier.
/* global jest */
for (const id of ['child_process', 'node:child_process']) {
  jest.mock(id, () => {
    const real = jest.requireActual('child_process');
    const refuse = (name) => () => {
      throw new Error(`child_process.${name}: the unit tier (*.spec.ts) starts no process; move this test to its package's test/ (the integration tier)`);
    };
    const starters = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'];
    return { ...real, ...Object.fromEntries(starters.map((n) => [n, refuse(n)])) };
  });
}
