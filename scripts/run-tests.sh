#!/usr/bin/env bash
# Runs the whole suite and ends with one line "N passed, N failed, N skipped": the build
# (tsc -b through Nx), the type check and the linter count as one check each, then jest (unit
# and multi-process tests, the package install outside the repository, the deploy tests).
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
  fi
}
check build npm run --silent build
check typecheck npm run --silent typecheck
check lint npm run --silent lint

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
