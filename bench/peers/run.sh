#!/usr/bin/env bash
# Side-by-side comparison: cmesh (its default: shared memory on one host; and forced onto TCP) vs
# torch Gloo vs Open MPI (shared memory, TCP loopback), one run.
# The table's `targets` column checks cmesh against Open MPI of the same run (bench/peers/targets.ts:
# ranks with a core each: <= 4 KiB within 2x Open MPI shm, from 1 MiB at least its busbw; more
# ranks than cores: never slower than Open MPI TCP, <= 4 KiB within 3x Open MPI shm), and a line
# below it counts the targets met.
# Installs the peers from Debian if missing, then runs bench/compare.ts. Arguments pass through:
#   bench/peers/run.sh                      # full run: worlds 2 and 4 (see bench/RESULTS.md)
#   bench/peers/run.sh --quick --worlds 2   # a few sizes, ~10 s
#   bench/peers/run.sh --markdown bench/last-run.md --json bench/last-run.json
#   bench/peers/run.sh --netns 2x2 [--quick]     # two hosts x two ranks as network namespaces on a
#                                               # link shaped to 1 Gbit/s (root): ring vs hierarchical vs Gloo
set -euo pipefail
cd "$(dirname "$0")/../.."
need=()
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || need+=(python3-torch)
command -v mpirun >/dev/null || need+=(openmpi-bin)
/usr/bin/python3 -c 'import mpi4py' 2>/dev/null || need+=(python3-mpi4py)
if ((${#need[@]})); then
  flock /tmp/apt.lock apt-get install -y --no-install-recommends "${need[@]}"
fi
exec node -r @swc-node/register bench/compare.ts "$@"
