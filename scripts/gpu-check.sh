#!/usr/bin/env bash
# GPU check for the nccl backend: builds the sidecar, runs a verified sweep of every collective
# and dtype through it, out of place and in place (world 1 on one GPU, and world N over all N GPUs
# when N > 1) and the same sweep through torch.distributed's nccl backend, printed side by side; then the library's
# nccl backend in user processes (initProcessGroup, every collective x dtype x reduce op checked
# element by element), and two ranks on one GPU (NCCL refuses it: a typed error on every rank).
# Without a GPU it prints "skipped: no GPU" and exits 0.
#
# Env: CMESH_NCCL_LIB (libnccl.so.2 to use; default: torch's nvidia-nccl wheel, then the
# loader's search), CMESH_CUDART_LIB (libcudart to use; default: the nvidia-cuda-runtime wheel
# beside it, then the loader's search), GPU_CHECK_MAX_BYTES (largest size, default 64 MiB),
# GPU_CHECK_VERIFY_MAX_BYTES (sizes checked element by element, default 8 MiB; larger ones are
# timed only), GPU_CHECK_DTYPES (all, or a comma list: float32,bfloat16), GPU_CHECK_ITERS (20).
# The world is the number of devices CUDA sees (CUDA_VISIBLE_DEVICES and MIG respected), from the
# sidecar's probe. The rows are kept as JSON in .tmp/gpu-check/. The multi-GPU first run (devices,
# transports, a dead peer, two process groups, two nodes): scripts/gpu-first-run.sh.
set -uo pipefail
cd "$(dirname "$0")/.."

. scripts/gpu-check/env.sh

max=${GPU_CHECK_MAX_BYTES:-$((64 << 20))}
check_max=${GPU_CHECK_VERIFY_MAX_BYTES:-$((8 << 20))}
dtypes=${GPU_CHECK_DTYPES:-all}
iters=${GPU_CHECK_ITERS:-20}
worlds=1
[ "$gpus" -gt 1 ] && worlds="1 $gpus"
out=.tmp/gpu-check
mkdir -p "$out"

rc=0
for w in $worlds; do
  echo
  echo "## cmesh nccl sidecar, world $w: every collective, types $dtypes, out of place and in place, one communicator"
  cmesh_script nccl-sweep --world "$w" --max "$max" --check-max "$check_max" --dtype "$dtypes" --iters "$iters" --json "$out/cmesh-w$w.json" || rc=1
  echo
  echo "## cmesh library, initProcessGroup({ backend: 'nccl' }) in $w user process(es)"
  cmesh_script library-nccl --world "$w" || rc=1
  echo
  if [ "$have_torch" -eq 1 ]; then
    echo "## torch.distributed nccl, world $w (the same steps; torch has all_reduce, broadcast and reduce in place only)"
    python3 scripts/gpu-check/torch_nccl_sweep.py --world "$w" --max "$max" --check-max "$check_max" --dtype "$dtypes" --iters "$iters" --json "$out/torch-w$w.json" || rc=1
    if [ -s "$out/cmesh-w$w.json" ] && [ -s "$out/torch-w$w.json" ]; then
      echo
      echo "## cmesh beside torch, world $w"
      cmesh_script compare "$out/cmesh-w$w.json" "$out/torch-w$w.json" || rc=1
    fi
  else
    echo "## torch.distributed nccl: skipped (python3 has no torch with CUDA)"
  fi
done
echo
echo "## two ranks on one GPU: NCCL refuses it; every rank must end with a typed error, none hang"
cmesh_script library-nccl --world 2 --same-device || rc=1
echo
if [ "$rc" -eq 0 ]; then echo "gpu-check: passed"; else echo "gpu-check: FAILED"; fi
exit $rc
