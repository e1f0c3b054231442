#!/usr/bin/env bash
# Runs the whole suite (jest: unit and multi-process tests) and ends with one line
# "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tmp
report=.tmp/jest-report.json
rm -f "$report"
npx jest --ci --json --outputFile="$report" "$@"
rc=$?
if [ -f "$report" ]; then
  node -e '
    const r = require(process.argv[1]);
    const skipped = r.numPendingTests + r.numTodoTests;
    let failed = r.numFailedTests;
    // a suite that fails to load has no tests counted; count it as a failure
    failed += r.testResults.filter((s) => s.status === "failed" && s.assertionResults.length === 0).length;
    console.log(`${r.numPassedTests} passed, ${failed} failed, ${skipped} skipped`);
  ' "$PWD/$report"
else
  echo "0 passed, 1 failed, 0 skipped"
fi
exit $rc
