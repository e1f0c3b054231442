// Prints two sweeps' JSON rows (nccl-sweep.ts --json, torch_nccl_sweep.py --json) side by side.
// Usage: node -r @swc-node/register scripts/gpu-check/compare.ts CMESH.json TORCH.json
import * as fs from 'fs';
import { formatComparison } from '@cmesh/bench';
import { BenchRowSchema } from '@cmesh/protocol';

const read = (file: string) => BenchRowSchema.array().parse(JSON.parse(fs.readFileSync(file, 'utf8')));
const [left, right] = process.argv.slice(2);
if (!left || !right) {
  console.log('usage: compare.ts CMESH.json TORCH.json');
  process.exit(1);
}
console.log(formatComparison(read(left), read(right), ['cmesh', 'torch']).join('\n'));
