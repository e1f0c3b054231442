// Core binding on a real process: a child node binds its main thread and gives the cores back.
import { execFileSync } from 'child_process';
import { readFileSync } from 'fs';
import { cpusAllowed } from '../src/transport/core-binding';

it('binds the main thread only, when asked, and gives it its cores back (Linux with taskset and two cores)', () => {
  const allowed = cpusAllowed(readFileSync('/proc/self/status', 'utf8'));
  if (process.platform !== 'linux' || allowed.length < 2) return; // nothing to choose from
  // in a child process, so that this test process keeps its cores
  const script = `
    process.env.LOCAL_RANK = '1';
    const { bindToCore, unbindMainThread, cpusAllowed } = require(${JSON.stringify(require.resolve('../src/transport/core-binding'))});
    const fs = require('fs');
    const list = (t) => cpusAllowed(fs.readFileSync('/proc/self/task/' + t + '/status', 'utf8'));
    const before = list(process.pid);
    const b = bindToCore();
    const main = list(process.pid);
    const threads = fs.readdirSync('/proc/self/task').filter((t) => t !== String(process.pid));
    const others = threads.map(list);
    const back = unbindMainThread(before);
    console.log(JSON.stringify({ before, b, main, others, back, after: list(process.pid) }));`;
  const out = JSON.parse(execFileSync(process.execPath, ['-r', '@swc-node/register', '-e', script], { encoding: 'utf8' }));
  expect(out.before).toEqual(allowed);
  expect(out.b).toEqual({ cpu: allowed[1] });
  expect(out.main).toEqual([allowed[1]]);
  expect(out.others.length).toBeGreaterThan(0);
  for (const l of out.others) expect(l).toEqual(allowed);
  expect(out.back).toBe(true);
  expect(out.after).toEqual(allowed);
});
