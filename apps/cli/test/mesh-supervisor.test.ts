// The process supervision under `cmesh up`: children are tracked by pid, their output is
// prefixed, an unexpected death is reported, and stopAll leaves no process behind (SIGKILL
// for a child that ignores SIGTERM).
import { Supervisor } from '../src/mesh/supervisor';

const node = process.execPath;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

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
});
