// The REST client against a server that drops the first connection mid-request (what a reused
// keep-alive socket closed by the server looks like): a GET is sent again, a POST is not, and a
// job submission is, under the same Idempotency-Key (the coordinator answers it with the same job).
import * as http from 'http';
import { AddressInfo } from 'net';
import { MeshApiError, MeshClient } from './client';

let server: http.Server;
let requests: string[];
let keys: (string | undefined)[];
let dropNext: boolean;

beforeEach(async () => {
  requests = [];
  keys = [];
  dropNext = true;
  server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    keys.push(req.headers['idempotency-key'] as string | undefined);
    if (dropNext) {
      dropNext = false;
      return req.socket.destroy();
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});

afterEach(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const client = () => new MeshClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 5000, undefined);

it('sends a GET again once when the connection drops', async () => {
  await expect(client().get('/agents')).resolves.toEqual({ ok: true });
  expect(requests).toEqual(['GET /agents', 'GET /agents']);
});

it('does not send a POST without a key twice: the caller hears the coordinator was unreachable', async () => {
  const err = await client()
    .post('/groups', { name: 'g' })
    .catch((e) => e);
  expect(err).toBeInstanceOf(MeshApiError);
  expect((err as MeshApiError).message).toMatch(/unreachable \((UND_ERR_SOCKET|ECONNRESET)\)/);
  expect(requests).toEqual(['POST /groups']);
});

it('sends a job submission whose answer was lost again, with the same Idempotency-Key', async () => {
  await expect(client().submitJob({ op: 'allReduce' })).resolves.toEqual({ ok: true });
  expect(requests).toEqual(['POST /jobs', 'POST /jobs']);
  expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
  expect(keys[1]).toBe(keys[0]);
  // the next submission is another job: another key
  await client().submitJob({ op: 'allReduce' });
  expect(keys[2]).not.toBe(keys[0]);
});

it('gives up on a lost answer after retryForMs, saying the coordinator was unreachable', async () => {
  server.removeAllListeners('request');
  server.on('request', (req: http.IncomingMessage) => (requests.push(`${req.method} ${req.url}`), req.socket.destroy()));
  const err = await client()
    .submitJob({ op: 'allReduce' }, { retryForMs: 500 })
    .catch((e) => e);
  expect((err as MeshApiError).message).toMatch(/unreachable/);
  expect(requests.length).toBeGreaterThanOrEqual(2);
});
