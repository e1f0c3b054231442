#!/usr/bin/env bash
# The multi-GPU first run: what a first run on N GPUs of one node, or on two nodes, must show
# before anything else is trusted.
#  1. which device and which NCCL transports each rank got (NCCL_DEBUG=INFO: "cudaDev N" at
#     Init COMPLETE; "via P2P/IPC", "via SHM/...", "via NET/IB/0" per channel);
#  2. two process groups issued in opposite orders on alternate ranks: both finish;
#  3. one rank's sidecar killed mid-collective: every other rank ends at its own deadline, with
#     an error naming the killed rank;
#  4. the sweep (every collective, out of place and in place) beside torch.distributed's.
# Without a GPU: "skipped: no GPU", exit 0. With one GPU: world 1, checks 1, 2 and 4 (3 needs a
# second GPU, and says so).
#
# One node, every GPU CUDA sees:   bash scripts/gpu-first-run.sh
# Two nodes, G GPUs each (torchrun's flags; run on both, node 0's address reachable from node 1,
# NCCL_SOCKET_IFNAME / NCCL_IB_HCA set as the fabric needs, ports PORT..PORT+2 open on node 0):
#   node 0: bash scripts/gpu-first-run.sh --nnodes 2 --node-rank 0 --master-addr HOST0 --master-port 29533
#   node 1: bash scripts/gpu-first-run.sh --nnodes 2 --node-rank 1 --master-addr HOST0 --master-port 29533
# Options: --nproc-per-node G (default: every GPU CUDA sees), --timeout-ms (check 3's deadline,
# 10000). Env: FIRST_RUN_DTYPES (float32,bfloat16), FIRST_RUN_MAX_BYTES (64 MiB),
# FIRST_RUN_VERIFY_MAX_BYTES (8 MiB), GPU_CHECK_ITERS (20); CMESH_NCCL_LIB / CMESH_CUDART_LIB as
# for scripts/gpu-check.sh. Exit status 1 when a check fails.
set -uo pipefail
cd "$(dirname "$0")/.."

nnodes=1 node_rank=0 master_addr=127.0.0.1 master_port=29533 nproc="" timeout_ms=10000
while [ $# -gt 0 ]; do
  case "$1" in
    --nnodes) nnodes=$2; shift 2 ;;
    --node-rank) node_rank=$2; shift 2 ;;
    --master-addr) master_addr=$2; shift 2 ;;
    --master-port) master_port=$2; shift 2 ;;
    --nproc-per-node) nproc=$2; shift 2 ;;
    --timeout-ms) timeout_ms=$2; shift 2 ;;
    *) echo "gpu-first-run: unknown argument $1 (see the script's header)"; exit 2 ;;
  esac
done
if [ "$nnodes" -gt 1 ] && [ "$master_addr" = 127.0.0.1 ]; then
  echo "gpu-first-run: two nodes need --master-addr (node 0's address that node 1 reaches)"
  exit 2
fi

. scripts/gpu-check/env.sh

nproc=${nproc:-$gpus}
if [ "$nproc" -gt "$gpus" ]; then
  echo "gpu-first-run: --nproc-per-node $nproc but CUDA sees $gpus device(s)"
  exit 2
fi
world=$((nnodes * nproc))
dtypes=${FIRST_RUN_DTYPES:-float32,bfloat16}
max=${FIRST_RUN_MAX_BYTES:-$((64 << 20))}
check_max=${FIRST_RUN_VERIFY_MAX_BYTES:-$((8 << 20))}
iters=${GPU_CHECK_ITERS:-20}
nodes=(--nnodes "$nnodes" --node-rank "$node_rank" --nproc-per-node "$nproc" --master-addr "$master_addr")
out=.tmp/gpu-first-run
mkdir -p "$out"
echo "# gpu-first-run: world $world = $nnodes node(s) x $nproc GPU(s); this is node $node_rank"
[ "$nproc" -eq 1 ] && [ "$nnodes" -eq 1 ] && echo "# one GPU: world 1; the dead-peer check needs a second GPU"

rc=0
echo
echo "# checks 1-3: devices and transports, two process groups, a dead peer"
cmesh_script first-run "${nodes[@]}" --master-port "$master_port" --timeout-ms "$timeout_ms" || rc=1

echo
echo "# check 4: the sweep, types $dtypes, out of place and in place, one communicator"
cmesh_script nccl-sweep "${nodes[@]}" --master-port $((master_port + 1)) --max "$max" --check-max "$check_max" \
  --dtype "$dtypes" --iters "$iters" --json "$out/cmesh.json" || rc=1
if [ "$have_torch" -eq 1 ]; then
  echo
  python3 scripts/gpu-check/torch_nccl_sweep.py "${nodes[@]}" --master-port $((master_port + 2)) --max "$max" \
    --check-max "$check_max" --dtype "$dtypes" --iters "$iters" --json "$out/torch.json" || rc=1
  if [ "$node_rank" -eq 0 ] && [ -s "$out/cmesh.json" ] && [ -s "$out/torch.json" ]; then
    echo
    echo "# cmesh beside torch (N/A: torch has all_reduce, broadcast and reduce in place only)"
    cmesh_script compare "$out/cmesh.json" "$out/torch.json" || rc=1
  fi
else
  echo "# torch.distributed nccl: skipped (python3 has no torch with CUDA)"
fi
echo
if [ "$rc" -eq 0 ]; then echo "gpu-first-run: passed"; else echo "gpu-first-run: FAILED"; fi
exit $rc
