// The REST client against a server that drops the first connection mid-request (what a reused
// keep-alive socket closed by the server looks like): a GET is sent again, a POST is not.
import * as http from 'http';
import { AddressInfo } from 'net';
import { MeshApiError, MeshClient } from './client';

let server: http.Server;
let requests: string[];
let dropNext: boolean;

beforeEach(async () => {
  requests = [];
  dropNext = true;
  server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
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

it('does not send a POST twice: the caller hears the coordinator was unreachable', async () => {
  const err = await client().submitJob({ op: 'allReduce' }).catch((e) => e);
  expect(err).toBeInstanceOf(MeshApiError);
  expect((err as MeshApiError).message).toMatch(/unreachable \((UND_ERR_SOCKET|ECONNRESET)\)/);
  expect(requests).toEqual(['POST /jobs']);
});
