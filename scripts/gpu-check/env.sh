# Sourced by scripts/gpu-check.sh and scripts/gpu-first-run.sh from the repository root: skips
# (exit 0, "skipped: no GPU") where nvidia-smi lists no device; builds the sidecar; finds
# libnccl/libcudart (CMESH_NCCL_LIB, CMESH_CUDART_LIB: default torch's wheels, then the loader's
# search); sets `gpus` (what CUDA sees, from the sidecar's probe), `have_torch` (0/1) and
# `cmesh_script NAME ARGS...` (scripts/gpu-check/NAME.ts from the sources, or the bundle that
# scripts/gpu-check/pack.sh made for a host without Node.js).
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ "${gpus:-0}" -eq 0 ]; then
  echo "skipped: no GPU (nvidia-smi lists no device)"
  exit 0
fi
echo "# gpu-check: nvidia-smi lists $gpus GPU(s)"
nvidia-smi -L

# the sidecar alone: its unit tests and the CPU simulation are not needed on a GPU host
cmake -S native/nccl-sidecar -B native/nccl-sidecar/build -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build native/nccl-sidecar/build -j"$(nproc)" --target cmesh-nccl-sidecar >/dev/null || { echo "gpu-check: sidecar build failed"; exit 1; }

have_torch=0
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then have_torch=1; fi

# torch's wheels bring libnccl.so.2 (nvidia-nccl-cu12/cu13) and libcudart (nvidia-cuda-runtime):
# use the same libraries as the peer. wheel_lib MODULE PATTERN prints the first match.
wheel_lib() {
  python3 - "$1" "$2" <<'PY' 2>/dev/null
import glob, importlib, os, sys
try:
    roots = list(importlib.import_module(sys.argv[1]).__path__)
except Exception:
    roots = []
for r in roots:
    # nvidia/nccl/lib (cu12 wheels), nvidia/cu13/lib (cu13 wheels), or deeper
    for p in sorted(glob.glob(os.path.join(r, "**", "lib", sys.argv[2]), recursive=True)):
        print(p); raise SystemExit
PY
}
[ -z "${CMESH_NCCL_LIB:-}" ] && CMESH_NCCL_LIB=$(wheel_lib nvidia.nccl 'libnccl.so*')
[ -z "${CMESH_NCCL_LIB:-}" ] && CMESH_NCCL_LIB=$(wheel_lib nvidia 'libnccl.so*')
[ -z "${CMESH_CUDART_LIB:-}" ] && CMESH_CUDART_LIB=$(wheel_lib nvidia.cuda_runtime 'libcudart.so*')
[ -z "${CMESH_CUDART_LIB:-}" ] && CMESH_CUDART_LIB=$(wheel_lib nvidia 'libcudart.so*')
export CMESH_NCCL_LIB CMESH_CUDART_LIB
echo "# libnccl: ${CMESH_NCCL_LIB:-<loader search>}"
echo "# libcudart: ${CMESH_CUDART_LIB:-<loader search>}"
probe=$(native/nccl-sidecar/build/cmesh-nccl-sidecar --probe)
echo "$probe"
# What CUDA sees (CUDA_VISIBLE_DEVICES, MIG instances), not every board nvidia-smi lists.
gpus=$(printf '%s' "$probe" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("deviceCount", 0))' 2>/dev/null || echo 0)
if [ "${gpus:-0}" -eq 0 ]; then
  echo "gpu-check: CUDA sees no device (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-}'); see the probe above"
  exit 1
fi
echo "# world: $gpus visible device(s)"

# The cmesh scripts (scripts/gpu-check/*.ts): from the sources (node_modules present), else the
# bundles that scripts/gpu-check/pack.sh made for a host without Node.js.
if command -v node >/dev/null 2>&1 && [ -d node_modules/@swc-node ]; then
  cmesh_script() { node -r @swc-node/register "scripts/gpu-check/$1.ts" "${@:2}"; }
elif [ -f .gpu/nccl-sweep.js ] && [ -f .gpu/node.gz ]; then
  [ -x .gpu/node ] || { gunzip -c .gpu/node.gz >.gpu/node && chmod +x .gpu/node; }
  # a bundle cannot find the sidecar relative to its sources: name the build output
  export CMESH_NCCL_SIDECAR=${CMESH_NCCL_SIDECAR:-$PWD/native/nccl-sidecar/build/cmesh-nccl-sidecar}
  cmesh_script() { .gpu/node ".gpu/$1.js" "${@:2}"; }
else
  echo "gpu-check: node_modules missing: run 'npm ci' (or 'make deps') first, or scripts/gpu-check/pack.sh on a machine with Node.js"
  exit 1
fi

