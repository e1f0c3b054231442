// Collectives as a service on a mesh with authentication (what `cmesh up` runs): members log in as
// the mesh's client user and the agents' member workers as their agent, each held to its role's
// subject permissions; a connection without a login is refused.
import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { connectMesh } from '@cmesh/client';
import { Mesh, startMesh, CLIENT_USER, nodeArgs, programEnv } from '@cmesh/testing/mesh';

const MEMBER = join(__dirname, 'support', 'member.ts');

function runMember(env: Record<string, string>): { proc: ChildProcess; out: Promise<{ code: number | null; lines: string[] }> } {
  const proc = spawn(process.execPath, nodeArgs(MEMBER), { env: { ...process.env, ...programEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  proc.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  return { proc, out: new Promise((r) => proc.once('exit', (code) => r({ code, lines: text.split('\n').filter(Boolean) }))) };
}

describe('collectives as a service with NATS authentication', () => {
  let mesh: Mesh;
  let stateDir: string;
  const procs: ChildProcess[] = [];

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'cmesh-svc-auth-'));
    mesh = await startMesh({ agents: 2, port: 0, auth: { stateDir }, write: () => undefined, readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await mesh?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('members logged in as the client user run an allReduce and a barrier through the agents', async () => {
    const env = { NATS_URL: mesh.natsUrl, GROUP: 'authed', SIZE: '2', SCENARIO: 'quick', ...mesh.auth!.login(CLIENT_USER) };
    const runs = [0, 1].map((r) => runMember({ ...env, LABEL: `m${r}` }));
    procs.push(...runs.map((r) => r.proc));
    const results = await Promise.all(runs.map((r) => r.out));
    for (const r of results) {
      expect(r.code).toBe(0);
      expect(
        r.lines.map((l) => (l.startsWith('{') ? (JSON.parse(l) as { event: string; checked?: number }) : null)).find((l) => l?.event === 'done'),
      ).toMatchObject({ checked: 1000 });
    }
  }, 150_000);

  it('refuses a member without a login', async () => {
    await expect(connectMesh({ servers: mesh.natsUrl, user: 'nobody', pass: 'wrong', nats: { reconnect: false, timeout: 5000 } })).rejects.toThrow(
      /Authorization/i,
    );
  });
});
