// npm pack/publish hooks: prepack puts the native addons this checkout built (`make native`) into
// prebuilds/<platform>-<arch>/, where an installed package looks for them; postpack (--remove) takes them out again. Without a build the
// package ships no reduce addon (it uses its JavaScript kernels) and no shm addon (its data plane
// stays on TCP).
const fs = require('fs');
const path = require('path');

const ADDONS = [
  ['reduce-addon', 'cmesh_reduce.node', 'the package will use its JavaScript kernels'],
  ['shm-transport', 'cmesh_shm.node', 'the package will use TCP between ranks of one host'],
];
const dir = path.resolve(__dirname, '..', 'prebuilds', `${process.platform}-${process.arch}`);
fs.rmSync(path.resolve(__dirname, '..', 'prebuilds'), { recursive: true, force: true });
// postpack: the copies served the tarball only; left in the checkout they would go stale
if (process.argv.includes('--remove')) process.exit(0);
for (const [native, file, without] of ADDONS) {
  const built = path.resolve(__dirname, '../../../native', native, 'build/Release', file);
  if (fs.existsSync(built)) {
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(built, path.join(dir, file));
    console.log(`prebuilds: ${path.relative(process.cwd(), path.join(dir, file))}`);
  } else {
    console.log(`prebuilds: no addon at ${built}; ${without}`);
  }
}
