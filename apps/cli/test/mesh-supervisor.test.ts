// The process supervision under `cmesh up`: children are tracked by pid, their output is
// prefixed, an unexpected death is reported, and stopAll leaves no process behind (SIGKILL
// for a child that ignores SIGTERM). A child with a restart policy is restarted alone, with
// backoff, until it dies too often.
import { Supervisor } from '../src/mesh/supervisor';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { isAlive as alive } from '@cmesh/testing';

const node = process.execPath;
describe('mesh supervisor', () => {
  let sup: Supervisor | undefined;
  afterEach(() => sup?.killAllNow());

  it('prefixes output, reports an unexpected exit, stops the rest by pid', async () => {
    const lines: string[] = [];
    sup = new Supervisor((l) => lines.push(l));
    const deaths: string[] = [];
    sup.onUnexpectedExit((c, code) => deaths.push(`${c.name}:${code}`));
    sup.start({ name: 'a', command: node, args: ['-e', 'console.log("hello a"); setInterval(() => {}, 1000)'] });
    // ignores SIGTERM: must be SIGKILLed after the grace period
    sup.start({ name: 'stubborn', command: node, args: ['-e', 'process.on("SIGTERM", () => {}); console.log("ready"); setInterval(() => {}, 1000)'] });
    const quitter = sup.start({ name: 'quitter', command: node, args: ['-e', 'process.exit(3)'] });
    await quitter.exited;
    await new Promise((r) => setTimeout(r, 50));
    expect(deaths).toEqual(['quitter:3']);
    const deadline = Date.now() + 10_000;
    while (!(lines.includes('[a]          hello a') && lines.some((l) => l.startsWith('[stubborn]') && l.endsWith('ready'))) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(lines).toContain('[a]          hello a');
    const pids = sup.pids();
    expect(pids).toHaveLength(3);
    const t0 = Date.now();
    await sup.stopAll(300);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250); // waited for the stubborn one
    expect(pids.filter(alive)).toEqual([]);
    expect(deaths).toEqual(['quitter:3']); // stopping is not a death
    expect(() => sup!.start({ name: 'late', command: node, args: ['-e', '0'] })).toThrow(/stopping/);
  });

  it('restarts a child that dies, alone, and gives up on one that keeps dying', async () => {
    const lines: string[] = [];
    sup = new Supervisor((l) => lines.push(l), { maxRestarts: 3, windowMs: 60_000, backoffMs: 20, maxBackoffMs: 100 });
    const deaths: string[] = [];
    sup.onUnexpectedExit((c, code) => deaths.push(`${c.name}:${code}`));
    const dir = mkdtempSync(join(tmpdir(), 'cmesh-sup-'));
    try {
      // dies on its first two starts (a counter file), then stays up
      const flaky = `const f=${JSON.stringify(join(dir, 'n'))}, fs=require('fs'); const n=fs.existsSync(f)?+fs.readFileSync(f,'utf8'):0; fs.writeFileSync(f, String(n+1)); if (n < 2) process.exit(7); setInterval(() => {}, 1000)`;
      const steady = sup.start({ name: 'steady', command: node, args: ['-e', 'setInterval(() => {}, 1000)'], restart: true });
      const steadyPid = steady.proc.pid;
      const f = sup.start({ name: 'flaky', command: node, args: ['-e', flaky], restart: true });
      const doomed = sup.start({ name: 'doomed', command: node, args: ['-e', 'process.exit(9)'], restart: true });
      const deadline = Date.now() + 20_000;
      while ((deaths.length === 0 || f.restarts.length < 2 || f.proc.exitCode !== null || !f.proc.pid) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      expect(deaths).toEqual(['doomed:9']); // after maxRestarts restarts
      expect(doomed.restarts).toHaveLength(3);
      expect(lines.filter((l) => l.startsWith('[doomed]'))).toEqual([
        '[doomed]     exited with code 9; restarting it in 20 ms (restart 1 of 3 allowed in 60 s)',
        '[doomed]     exited with code 9; restarting it in 40 ms (restart 2 of 3 allowed in 60 s)',
        '[doomed]     exited with code 9; restarting it in 80 ms (restart 3 of 3 allowed in 60 s)',
        '[doomed]     exited with code 9 after 3 restarts in 60 s: giving up',
      ]);
      expect(f.restarts).toHaveLength(2);
      expect(alive(f.proc.pid!)).toBe(true);
      expect(steady.proc.pid).toBe(steadyPid); // the others were left alone
      const pids = sup.pids();
      await sup.stopAll(300);
      expect(pids.filter(alive)).toEqual([]);
      expect(deaths).toEqual(['doomed:9']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
