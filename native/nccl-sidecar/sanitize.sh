#!/usr/bin/env bash
# Builds the sidecar, its unit tests and the CPU simulation under AddressSanitizer and UBSan
# (build/asan-ubsan) and runs every test there with ctest: a memory error, a leak or undefined
# behaviour fails it. `make test` runs this as one check; the build is incremental after the first.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$src/build/asan-ubsan}"
# -O0: the sanitized build at -O1 takes about 2.5 times the CPU (gpu_runtime.cpp: 18 s against 7;
# the whole build 140 s against 65), and the tests wait on sockets and deadlines, not on the CPU
log="$build.log"
mkdir -p "$build"
if ! { cmake -S "$src" -B "$build" -DCMESH_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O0" -DCMESH_USE_CUDA_HEADERS=OFF &&
  cmake --build "$build" -j"${CMESH_BUILD_JOBS:-2}"; } >"$log" 2>&1; then
  cat "$log"
  echo "sanitize.sh: the build failed (log: $log)" >&2
  exit 1
fi
ctest --test-dir "$build" --output-on-failure --timeout 300
