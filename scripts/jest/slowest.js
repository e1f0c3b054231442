#!/usr/bin/env node
// The slowest test files and tests of a jest JSON report (make test writes .tmp/jest-report.json):
//   node scripts/jest/slowest.js [report] [count]
// Wall seconds per file as jest measured them (two files run at once with two workers), the sum
// over files, and the tier each file is in.
const fs = require('fs');
const path = require('path');
const file = path.resolve(process.argv[2] ?? '.tmp/jest-report.json');
const count = Number(process.argv[3] ?? 15);
const r = require(file);
// the report's files relative to the checkout it came from (the directory above them with a jest.config.js)
let dir = path.dirname(r.testResults[0]?.name ?? file);
while (dir !== path.dirname(dir) && !fs.existsSync(path.join(dir, 'jest.config.js'))) dir = path.dirname(dir);
const root = dir + path.sep;
const tier = (name) => (name.endsWith('.spec.ts') ? 'unit' : name.startsWith('test/') ? 'system' : 'integration');
const suites = r.testResults.map((s) => {
  const name = s.name.startsWith(root) ? s.name.slice(root.length) : s.name;
  return { name, seconds: (s.endTime - s.startTime) / 1000, tests: s.assertionResults };
});
const byTier = {};
for (const s of suites) byTier[tier(s.name)] = (byTier[tier(s.name)] ?? 0) + s.seconds;
const wall = (Math.max(...r.testResults.map((s) => s.endTime)) - r.startTime) / 1000;
console.log(
  `jest: ${wall.toFixed(0)} s wall, ${suites.length} files; file seconds by tier: ${Object.entries(byTier)
    .map(([t, v]) => `${t} ${v.toFixed(0)}`)
    .join(', ')}`,
);
console.log(`slowest ${count} files:`);
for (const s of [...suites].sort((a, b) => b.seconds - a.seconds).slice(0, count))
  console.log(`${s.seconds.toFixed(1).padStart(8)} s  ${s.name} (${s.tests.length} tests)`);
const tests = suites.flatMap((s) => s.tests.map((a) => ({ seconds: (a.duration ?? 0) / 1000, name: `${s.name}: ${a.title}` })));
console.log(`slowest ${count} tests:`);
for (const t of tests.sort((a, b) => b.seconds - a.seconds).slice(0, count)) console.log(`${t.seconds.toFixed(1).padStart(8)} s  ${t.name.slice(0, 150)}`);
