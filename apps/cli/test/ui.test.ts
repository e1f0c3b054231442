// `cmesh ui` against a real nats-server and coordinator process with an API token: it prints the
// login link made from the token wherever the CLI finds it (CMESH_API_TOKEN, --token-file, the
// state directory of `cmesh up` for a local coordinator), never the token, and the link gets a
// browser's cookie; a token of another coordinator, no token, an unreachable address are said on
// stderr with exit code 1 and no link, a bad address (a usage error) with 2.
import { spawn } from 'child_process';
import { randomBytes } from 'crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { uiLoginLink } from '@cmesh/protocol';
import { NatsServer, freePort, startNatsServer } from '@cmesh/testing';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';

const CMESH = join(__dirname, '../bin/cmesh.js');
const TOKEN = randomBytes(24).toString('base64url');
let nats: NatsServer;
let coord: CoordinatorProcess;
const dir = mkdtempSync(join(tmpdir(), 'cmesh-ui-cli-'));

/** `cmesh ui ...` with only the variables given (no CMESH_API_TOKEN from the caller's environment). */
function cmeshUi(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CMESH_')));
  const child = spawn(process.execPath, [CMESH, 'ui', ...args], {
    env: { ...base, CMESH_STATE_DIR: join(dir, 'no-state'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

beforeAll(async () => {
  nats = await startNatsServer();
  coord = await startCoordinatorProcess(nats.url, { CMESH_API_TOKEN: TOKEN });
}, 40000);

afterAll(async () => {
  await coord?.stop();
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('cmesh ui', () => {
  it('prints the login link from the token in CMESH_API_TOKEN, --token-file or the local state directory', async () => {
    const link = uiLoginLink(coord.url, TOKEN);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    const stateDir = join(dir, 'state');
    rmSync(stateDir, { recursive: true, force: true });
    mkdirSync(stateDir, { mode: 0o700 });
    writeFileSync(join(stateDir, 'api-token'), `${TOKEN}\n`, { mode: 0o600 });
    for (const [how, args, env] of [
      ['CMESH_API_TOKEN', ['--coordinator', coord.url], { CMESH_API_TOKEN: TOKEN }],
      ['--token-file', ['--coordinator', `${coord.url}/`, '--token-file', tokenFile], {}],
      ['the state directory', [], { CMESH_COORDINATOR: coord.url, CMESH_STATE_DIR: stateDir }],
    ] as const) {
      const r = await cmeshUi([...args], env);
      expect([how, r.code, r.stdout, r.stderr]).toEqual([how, 0, `${link}\n`, '']);
      expect(r.stdout).not.toContain(TOKEN);
    }
    // the printed link is what a browser opens: a cookie and on to /ui
    const res = await fetch(link, { redirect: 'manual' });
    expect([res.status, res.headers.get('location')]).toEqual([303, '/ui']);
    expect(res.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Lax/);
  }, 60000);

  it("another coordinator's token, no token, a bad or unreachable address: said, no link", async () => {
    const other = randomBytes(24).toString('base64url');
    const down = `http://127.0.0.1:${await freePort()}`;
    for (const [args, env, code, message] of [
      [
        ['--coordinator', coord.url],
        { CMESH_API_TOKEN: other },
        1,
        /did not accept the login token: the API token here .* is not one of http:\/\/127\.0\.0\.1:\d+'s/,
      ],
      [['--coordinator', coord.url], {}, 1, /the coordinator asks for a token: set CMESH_API_TOKEN/],
      [['--coordinator', 'localhost:7700'], {}, 2, /--coordinator "localhost:7700": http:\/\/ or https:\/\/ only/],
      [['--coordinator', down], { CMESH_API_TOKEN: TOKEN }, 1, /coordinator http:\/\/127\.0\.0\.1:\d+ unreachable \(ECONNREFUSED\)/],
    ] as const) {
      const r = await cmeshUi([...args], env);
      expect([args, r.code, r.stdout]).toEqual([args, code, '']);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain(other);
    }
  }, 60000);

  it('--no-check prints the link without asking the coordinator; without a token, the page itself', async () => {
    const down = `http://127.0.0.1:${await freePort()}`;
    expect(await cmeshUi(['--coordinator', down, '--no-check'])).toEqual({ code: 0, stdout: `${down}/ui\n`, stderr: '' });
  }, 30000);
});
