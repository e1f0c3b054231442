#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU host that has neither Node.js nor node_modules
# (a bare node, or an image with only CUDA and Python): this machine's Node binary (gzip) and the
# cmesh scripts bundled, one file each, in .gpu/ (git-ignored). Copy the repository with .gpu/ to the
# host and run scripts/gpu-check.sh there: it unpacks and uses them when `node` is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu
for script in nccl-sweep library-nccl first-run compare; do
  npx esbuild "scripts/gpu-check/$script.ts" --bundle --platform=node --target=node20 \
    --tsconfig=tsconfig.base.json --log-level=warning --outfile=".gpu/$script.js"
done
gzip -6 -c "$(command -v node)" >.gpu/node.gz
rm -f .gpu/node
du -sh .gpu
