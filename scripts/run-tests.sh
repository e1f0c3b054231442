#!/usr/bin/env bash
# Runs the whole suite and ends with one line "N passed, N failed, N skipped": the build
# (tsc -b through Nx), the type check, the linter and the sidecar's sanitizer run count as one
# check each, then jest over its three tiers in one run (jest.config.js: unit, integration,
# system; arguments go to jest).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tmp
export NX_DAEMON=false NX_ISOLATE_PLUGINS=false
# children started through swc from the sources find the workspace's path mapping
export TS_NODE_PROJECT="$PWD/tsconfig.json"
# the hundreds of processes the tests start load the same modules: V8's code cache (Node 22+)
# saves about a fifth of each start
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$PWD/.tmp/node-compile-cache}"

checks_passed=0
checks_failed=0
check() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@"; then
    checks_passed=$((checks_passed + 1))
  else
    echo "== $name FAILED"
    checks_failed=$((checks_failed + 1))
    return 1
  fi
}
# the programs the tests start (coordinator, agents, workers, the cmesh command) run from this
# build rather than through swc (apps/cli/src/programs.ts)
check build npm run --silent build && export CMESH_PROGRAMS=dist
check typecheck npm run --silent typecheck
check lint npm run --silent lint
# the nccl sidecar, its C++ tests and the CPU simulation under AddressSanitizer and UBSan (ctest)
check sanitizers bash native/nccl-sidecar/sanitize.sh

report=.tmp/jest-report.json
rm -f "$report"
npx jest --ci --json --outputFile="$report" "$@"
rc=$?
if [ -f "$report" ]; then
  node -e '
    const r = require(process.argv[1]);
    const skipped = r.numPendingTests + r.numTodoTests;
    let failed = r.numFailedTests;
    // a suite that fails outside its tests (load error, a failing afterAll) counts as one failure
    failed += r.testResults.filter((s) => s.status === "failed" && !s.assertionResults.some((a) => a.status === "failed")).length;
    const [cp, cf] = process.argv.slice(2).map(Number);
    console.log(`${r.numPassedTests + cp} passed, ${failed + cf} failed, ${skipped} skipped`);
  ' "$PWD/$report" "$checks_passed" "$checks_failed"
else
  echo "$checks_passed passed, $((checks_failed + 1)) failed, 0 skipped"
fi
[ "$checks_failed" -eq 0 ] && exit $rc
exit 1
