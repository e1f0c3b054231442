// `npm run pack [-- <dir>]`: every publishable package of the workspace (those not marked
// private) as an npm tarball in <dir> (default dist-packages/), for `npm install <tarball>` in a
// project outside this checkout while the packages are not on a registry. Each package's prepack
// compiles it, so a fresh clone needs only `npm ci` first. The native addons
// (SIMD reduce, shared-memory transport) are built when missing and a C++ toolchain is present:
// @cmesh/collectives carries them in prebuilds/, and without them uses its JavaScript kernels and
// TCP. The folder's tarballs are removed first, so a second run leaves exactly one per package.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(process.argv[2] ?? join(ROOT, 'dist-packages'));
const say = (line) => console.log(`pack: ${line}`);
/** `p` as the user would type it from where they are. */
const shown = (p) => (relative(process.cwd(), p).startsWith('..') ? p : relative(process.cwd(), p) || '.');

/** The workspace's packages that are published (package.json without "private": true). */
function publishable() {
  const dirs = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).workspaces.flatMap((glob) => {
    const parent = join(ROOT, glob.replace(/\/\*$/, ''));
    return readdirSync(parent).map((d) => join(parent, d));
  });
  return dirs
    .filter((d) => existsSync(join(d, 'package.json')))
    .map((d) => JSON.parse(readFileSync(join(d, 'package.json'), 'utf8')))
    .filter((p) => !p.private)
    .map((p) => p.name)
    .sort();
}

/** The addons @cmesh/collectives' prepack copies, built as `make native` does when they are missing. */
function buildAddons() {
  const addons = [['reduce-addon', 'cmesh_reduce.node']];
  if (process.platform === 'linux') addons.push(['shm-transport', 'cmesh_shm.node']);
  for (const [name, file] of addons) {
    const dir = join(ROOT, 'native', name);
    if (existsSync(join(dir, 'build/Release', file))) continue;
    say(`building native/${name} (node-gyp)`);
    const r = spawnSync('npx', ['--no-install', 'node-gyp', 'rebuild', '--loglevel=error'], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
    });
    if (r.status !== 0)
      say(
        `native/${name} not built (a C++ compiler, make and python3 are needed): @cmesh/collectives will go without it\n${r.stderr.trim().split('\n').slice(-5).join('\n')}`,
      );
  }
}

const names = publishable();
buildAddons();
// the tarballs of an earlier run go (another version's too), nothing else: the folder may be the user's
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) if (f.endsWith('.tgz')) rmSync(join(out, f));
say(`${names.join(' ')} -> ${shown(out)}/`);
execFileSync('npm', ['pack', '--silent', '--pack-destination', out, ...names.flatMap((n) => ['-w', n])], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
const tarballs = readdirSync(out)
  .filter((f) => f.endsWith('.tgz'))
  .sort();
if (tarballs.length !== names.length) throw new Error(`pack: ${names.length} packages but ${tarballs.length} tarballs in ${out}`);
for (const t of tarballs) say(`${join(shown(out), t)}  ${Math.round(statSync(join(out, t)).size / 1024)} KiB`);
const collectives = tarballs.find((t) => t.startsWith('cmesh-collectives-'));
const addons = execFileSync('tar', ['tzf', join(out, collectives)], { encoding: 'utf8' })
  .split('\n')
  .filter((f) => f.startsWith('package/prebuilds/') && f.endsWith('.node'))
  .map((f) => f.slice('package/'.length));
say(`@cmesh/collectives carries ${addons.length ? addons.join(', ') : 'no native addon (JavaScript kernels, TCP only)'}`);
