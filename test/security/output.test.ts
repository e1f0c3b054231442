// Terminal and page injection, tried as a hostile peer would against a mesh with authentication on:
// an agent's login registers itself under a name, host and backend reason full of control
// characters (ANSI escapes that clear the screen and recolour, a C1 CSI, DEL, a right-to-left
// override, markup), and a client joins a service group with such a label. `cmesh status` (tables
// and --json), /ui and the coordinator's log lines then carry no raw control character: each is
// shown escaped (`\x1b[2J`), and /ui escapes the markup too. The job on the renamed agent still
// succeeds with every element right.
import { randomBytes } from 'crypto';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { clusterNames, JobRecord, PROTOCOL_VERSION } from '@cmesh/protocol';
import { Mesh, startMesh, cmesh } from '@cmesh/testing/mesh';
import { statePassword, TestLogins } from './support/logins';

const n = clusterNames();
/** clears the screen, turns red, a C1 CSI, DEL, a right-to-left override, and markup */
const HOSTILE = 'evil\u001b[2J\u001b[31mred\u009b1m\u007f\u202egnp.exe<script>x</script>';
/** how printable() shows it */
const SHOWN = 'evil\\x1b[2J\\x1b[31mred\\x9b1m\\x7f\\u202egnp.exe<script>x</script>';
/** any control character a terminal acts on; newlines (the output's own lines) excepted */
// eslint-disable-next-line no-control-regex -- looking for control characters is the point
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

describe('what peers named reaches no terminal or page raw', () => {
  let mesh: Mesh;
  let stateDir: string;
  const lines: string[] = [];

  const logins = new TestLogins(
    () => mesh.natsUrl,
    statePassword(() => stateDir),
  );
  const login = async (user: string) => (await logins.login(user)).nc;

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'cmesh-sec-output-'));
    mesh = await startMesh({ agents: 1, port: 0, auth: { stateDir }, write: (l) => lines.push(l), readyTimeoutMs: 90_000 });
  }, 120_000);

  afterAll(async () => {
    await logins.closeAll();
    await mesh?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('an agent named and a member labelled with escape sequences: status, --json, /ui and the logs show them escaped', async () => {
    // agent-0's own login re-registers it under a hostile name, host and backend reason
    const agent = await login('agent-0');
    const [real] = (await mesh.client.get<{ agents: { agentId: string; dataPlane: { host: string } }[] }>('/agents')).agents;
    const reg = {
      protocolVersion: PROTOCOL_VERSION,
      agentId: 'agent-0',
      name: HOSTILE,
      host: HOSTILE,
      device: { kind: 'cpu', index: 0 },
      backends: [
        { name: 'tcp', available: true },
        { name: 'nccl', available: false, reason: HOSTILE },
      ],
      dataPlane: real.dataPlane,
    };
    expect((await agent.request(n.agents.register('agent-0'), JSON.stringify(reg), { timeout: 10_000 })).json()).toMatchObject({ ok: true });
    // a client joins a service group under a hostile label (two members wanted, one agent: it ends with an error, label shown)
    const client = await login('client');
    const join = { name: 'grads', size: 2, member: `m${randomBytes(6).toString('hex')}`, label: HOSTILE, key: randomBytes(32).toString('base64') };
    expect((await client.request(n.serviceGroups.join, JSON.stringify(join), { timeout: 10_000 })).json()).toMatchObject({ ok: true });
    // a job on the renamed agent: its record and the coordinator's log line name the agent
    const job = await mesh.client.submitJob({ op: 'allReduce', sizes: [4096], iters: 5, warmup: 1, check: true, nranks: 1 });
    const done: JobRecord = await mesh.client.waitJob(job.id, undefined, { timeoutMs: 120_000 });
    expect([done.state, done.reason, done.rows.map((r) => (r.outOfPlace ?? r.inPlace)?.wrong)]).toEqual(['succeeded', undefined, [0]]);
    expect(done.members.map((m) => m.name)).toEqual([HOSTILE]);

    const token = ['--coordinator', mesh.coordinatorUrl, '--token-file', mesh.auth!.apiTokenFile];
    const status = await cmesh(['status', ...token], { timeoutMs: 60_000 });
    expect({ code: status.code, err: status.err }).toEqual({ code: 0, err: '' });
    expect(status.out).not.toMatch(RAW);
    // the agents' table, the service groups' (label) and the jobs' (member names) show it escaped
    expect(status.out.split(SHOWN.slice(0, 20)).length - 1).toBeGreaterThanOrEqual(3);

    const asJson = await cmesh(['status', '--json', ...token], { timeoutMs: 60_000 });
    expect(asJson.code).toBe(0);
    expect(asJson.out).not.toMatch(RAW);
    const parsed = JSON.parse(asJson.out) as { agents: { name: string }[]; jobs: JobRecord[] };
    expect(parsed.agents.map((a) => a.name)).toEqual([HOSTILE]); // the same data, written safely
    expect(parsed.jobs.find((j) => j.id === job.id)?.members.map((m) => m.name)).toEqual([HOSTILE]);

    const ui = await fetch(`${mesh.coordinatorUrl}/ui`, { headers: { authorization: `Bearer ${mesh.auth!.apiToken}` } });
    expect(ui.status).toBe(200);
    const page = await ui.text();
    expect(page).not.toMatch(RAW);
    expect(page).not.toContain('<script>');
    expect(page).toContain('evil\\x1b[2J\\x1b[31mred\\x9b1m\\x7f\\u202egnp.exe&lt;script&gt;');

    // the coordinator logged the job's start naming the agent: escaped there too (JSON alone leaves C1, DEL and U+202E raw)
    const started = lines.filter((l) => l.startsWith('[coordinator]') && l.includes(`job ${job.id} started`));
    expect(started).toHaveLength(1);
    expect(started[0]).toContain('evil\\\\x1b[2J');
    expect(lines.filter((l) => RAW.test(l))).toEqual([]);
  }, 200_000);
});
