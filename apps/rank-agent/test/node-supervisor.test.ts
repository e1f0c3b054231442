// The node mode's supervisor on real processes: an agent that keeps dying at start ends the node
// (exit 1, the others stopped) instead of restarting forever; one that ignores SIGTERM is killed
// after the grace; the others' restarts are per agent.
import { NodePlan } from '../src/node/node-plan';
import { isAlive } from '@cmesh/testing';
import { MAX_QUICK_FAILURES, NodeSupervisor } from '../src/node/node-supervisor';

const plan = (n: number): NodePlan => ({
  node: 'n1',
  argv: [],
  agents: Array.from({ length: n }, (_, i) => ({ name: `n1-gpu${i}`, device: i, env: { CMESH_DEVICE_INDEX: String(i) } })),
});
const alive = isAlive;

describe('node supervisor', () => {
  it(`stops the node (exit 1) when an agent dies ${MAX_QUICK_FAILURES} times in a row right after its start; the healthy one is stopped too`, async () => {
    const lines: string[] = [];
    // device 0 lives, device 1 exits at once
    const script = 'if [ "$CMESH_DEVICE_INDEX" = 1 ]; then exit 3; fi; exec sleep 60';
    const sup = new NodeSupervisor(plan(2), { command: 'sh', args: ['-c', script], backoffMs: 20, stopGraceMs: 2000, log: (l) => lines.push(l) }).start();
    const healthy = sup.pids()[0];
    expect(await sup.done).toBe(1);
    expect(lines.filter((l) => /n1-gpu1 \(pid \d+\) exited with code 3/.test(l))).toHaveLength(MAX_QUICK_FAILURES);
    expect(lines.at(-2)).toMatch(
      new RegExp(`n1-gpu1 .* exited with code 3, ${MAX_QUICK_FAILURES} times in a row within 30 s of its start: stopping the node's agents`),
    );
    expect(lines.some((l) => /n1-gpu0 .* exited/.test(l))).toBe(false);
    expect(alive(healthy)).toBe(false);
  }, 30_000);

  it('SIGTERM: every agent gets it; one that ignores it is killed after the grace; exit 0', async () => {
    const lines: string[] = [];
    const script = 'if [ "$CMESH_DEVICE_INDEX" = 1 ]; then trap "" TERM; fi; exec sleep 60';
    const sup = new NodeSupervisor(plan(2), { command: 'sh', args: ['-c', script], stopGraceMs: 500, log: (l) => lines.push(l) }).start();
    await new Promise((r) => setTimeout(r, 300));
    const pids = sup.pids();
    const t0 = Date.now();
    expect(await sup.stop('SIGTERM')).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    expect(lines.some((l) => new RegExp(`n1-gpu1 \\(pid ${pids[1]}\\) still running after 0.5 s: SIGKILL`).test(l))).toBe(true);
    for (const p of pids) expect(alive(p)).toBe(false);
    expect(await sup.done).toBe(0);
  }, 30_000);
});
