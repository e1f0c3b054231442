import { spawn } from 'child_process';
import { writeFileSync } from 'fs';
import { join } from 'path';
import { connect } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { natsClusterNodeConfig } from '@cmesh/protocol';
import { freePort, isAlive, startNatsCluster } from '../src';

const routeAuth = { password: 'route-secret-0123456789abcdefghij' };

it('three servers form one JetStream cluster; an R3 bucket outlives the SIGKILL of its leader; a server without the route login is refused', async () => {
  const cluster = await startNatsCluster({ routeAuth });
  const pids = cluster.nodes.map((n) => n.pid());
  try {
    const leader = await cluster.waitForJetStream();
    const metas = await Promise.all(cluster.nodes.map((n) => n.meta()));
    expect(metas.map((m) => m.leader)).toEqual([leader, leader, leader]);
    expect(metas.every((m) => m.clusterSize === 3)).toBe(true);

    const nc = await connect({ servers: cluster.urls, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    const kv = await new Kvm(nc).create('cluster_check', { replicas: 3 });
    await kv.put('k', new TextEncoder().encode('v1'));
    // the meta leader dies: the others elect one, the bucket still reads and writes
    const dead = cluster.nodes.find((n) => n.name === leader)!;
    await dead.kill();
    const next = await cluster.waitForJetStream();
    expect(next).not.toBe(leader);
    await kv.put('k', new TextEncoder().encode('v2'));
    expect(new TextDecoder().decode((await kv.get('k'))!.value)).toBe('v2');
    // back on its ports and store, it catches up
    await dead.start();
    await cluster.waitForJetStream();
    const back = await connect({ servers: dead.url });
    const status = await (await new Kvm(back).open('cluster_check')).status();
    expect(status.replicas).toBe(3);
    await back.close();
    await nc.close();

    // a fourth server that knows the routes but not the route password: no route comes up
    const port = await freePort();
    const conf = join(cluster.nodes[0].storeDir, '..', 'intruder.conf');
    const routes = cluster.nodes.map((n) => `127.0.0.1:${n.clusterPort}`);
    writeFileSync(
      conf,
      natsClusterNodeConfig({
        serverName: 'intruder',
        host: '127.0.0.1',
        port,
        clusterPort: await freePort(),
        httpPort: await freePort(),
        routes,
        routeAuth: { password: 'not-the-route-secret-0123456789' },
      }),
    );
    const intruder = spawn('nats-server', ['-c', conf], { stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 2500));
      const routez = await cluster.nodes[0].monitor<{ num_routes: number; routes: { remote_id: string }[] }>('/routez');
      expect(routez.body.num_routes).toBe(2);
    } finally {
      intruder.kill('SIGKILL');
    }
  } finally {
    await cluster.stop();
  }
  expect(pids.map((p) => isAlive(p))).toEqual([false, false, false]);
}, 90_000);

it('lame duck mode: the server leaves and clients move to the others', async () => {
  const cluster = await startNatsCluster({ lameDuck: { duration: '30s', grace: '1s' } });
  try {
    await cluster.waitForJetStream();
    const nc = await connect({ servers: cluster.nodes[0].url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    const t0 = Date.now();
    await cluster.nodes[0].lameDuck();
    expect(cluster.nodes[0].running()).toBe(false);
    // the client learned the others from the cluster's INFO and is on one of them now (a flush
    // while it is still moving rejects with 'connection disconnected': until it is there)
    for (const end = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 100))) {
      try {
        await nc.flush();
        break;
      } catch (e) {
        if (Date.now() > end) throw e;
      }
    }
    expect(nc.getServer()).not.toBe(`127.0.0.1:${cluster.nodes[0].port}`);
    expect(Date.now() - t0).toBeLessThan(45_000);
    await nc.close();
  } finally {
    await cluster.stop();
  }
}, 90_000);
