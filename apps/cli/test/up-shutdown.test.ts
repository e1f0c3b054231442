// Ctrl-C on `cmesh up` as a terminal delivers it: SIGINT to the whole foreground process group.
// The mesh stops in order (agents, then the coordinator, then nats-server), so nothing waits on
// a NATS server that already left, and an idle mesh of 2 agents is down within 2 s.
import { spawn } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { markedPids } from '@cmesh/testing';

const CMESH = join(__dirname, '../bin/cmesh.js');

describe('cmesh up: Ctrl-C', () => {
  const marker = `up-stop-${process.pid}-${Date.now()}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'cmesh-up-stop-'));

  afterAll(() => {
    for (const pid of markedPids(marker)) process.kill(pid, 'SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('stops agents, then the coordinator, then nats-server, within 2 s of a SIGINT to the process group', async () => {
    // a group of its own, as a shell gives a foreground job: the SIGINT below reaches every
    // process left in that group, exactly what Ctrl-C in a terminal does
    const up = spawn(process.execPath, [CMESH, 'up', '--agents', '2', '--port', '0', '--nats-port', '0'], {
      env: { ...process.env, CMESH_TEST_MARK: marker, CMESH_STATE_DIR: stateDir },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    up.stdout!.on('data', (d) => (out += d));
    up.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => up.once('exit', (code) => r(code)));
    for (let end = Date.now() + 90_000; !/mesh up: /.test(out) && Date.now() < end && up.exitCode === null; ) await new Promise((r) => setTimeout(r, 50));
    expect(out).toMatch(/mesh up: /);
    await new Promise((r) => setTimeout(r, 1000)); // idle: heartbeats and the leader's ticks running
    const from = out.length;
    const sent = Date.now();
    process.kill(-up.pid!, 'SIGINT');
    const code = await exited;
    const tookMs = Date.now() - sent;
    const tail = out.slice(from);
    expect(code).toBe(0);
    const stops = tail
      .split('\n')
      .filter((l) => /^cmesh: stopped /.test(l))
      .map((l) => /^cmesh: stopped (.+) in \d+ ms$/.exec(l)![1]);
    expect(stops).toEqual(['agent-0 agent-1', 'coordinator', 'nats']);
    // nats-server began its shutdown only after the coordinator was gone
    expect(tail.indexOf('cmesh: stopped coordinator')).toBeLessThan(tail.indexOf('Initiating Shutdown'));
    expect(tail).not.toMatch(/TIMEOUT|disconnect/i);
    expect(tookMs).toBeLessThanOrEqual(2000);
    expect(markedPids(marker)).toEqual([]);
  }, 120_000);
});
