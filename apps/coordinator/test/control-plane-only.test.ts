// The coordinator loads no data-plane code: requiring its whole Nest module tree in a fresh
// process loads none of the library's process groups, transports, algorithms, backends or native
// addons, and none of the bench harness's timed loops or NCCL sweep.
import { execFileSync } from 'child_process';
import * as path from 'path';

const ROOT = path.resolve(__dirname, '../../..');

it('requiring the coordinator loads no data-plane module', () => {
  const script = `require(${JSON.stringify(path.join(ROOT, 'apps/coordinator/src/app.module.ts'))});
    process.stdout.write(JSON.stringify(Object.keys(require.cache).filter((f) => f.includes('/libs/')).map((f) => f.slice(${ROOT.length + 1}))));`;
  const out = execFileSync(process.execPath, ['-r', require.resolve('@swc-node/register'), '-e', script], {
    env: { ...process.env, TS_NODE_PROJECT: path.join(ROOT, 'tsconfig.json') },
    encoding: 'utf8',
    timeout: 60_000,
  });
  const loaded: string[] = JSON.parse(out);
  expect(loaded).toContain('libs/collectives/src/nats.ts'); // it did load the library's entries
  const dataPlane = loaded.filter((f) =>
    /^libs\/collectives\/src\/(index|distributed|process-group|work)\.ts$|^libs\/collectives\/src\/(transport|backends|algorithms|reduce|store)\/|^libs\/bench\/src\/(index|step|rank-sweep)\.ts$|^libs\/bench\/src\/nccl\/|^libs\/client\//.test(
      f,
    ),
  );
  expect(dataPlane).toEqual([]);
});
