// npm pack/publish hook: puts the reduce addon this checkout built (`make native`) into
// prebuilds/<platform>-<arch>/, where an installed package looks for it. Without a build the
// package ships no addon and uses its JavaScript kernels.
const fs = require('fs');
const path = require('path');

const built = path.resolve(__dirname, '../../../native/reduce-addon/build/Release/cmesh_reduce.node');
const dir = path.resolve(__dirname, '..', 'prebuilds', `${process.platform}-${process.arch}`);
fs.rmSync(path.resolve(__dirname, '..', 'prebuilds'), { recursive: true, force: true });
if (fs.existsSync(built)) {
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(built, path.join(dir, 'cmesh_reduce.node'));
  console.log(`prebuilds: ${path.relative(process.cwd(), path.join(dir, 'cmesh_reduce.node'))}`);
} else {
  console.log(`prebuilds: no addon at ${built}; the package will use its JavaScript kernels`);
}
