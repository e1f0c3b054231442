// InboundTransport against a real nats-server: Nest @MessagePattern/@EventPattern handlers on a
// connection the process already has, each body decoded by Inbound (rejections counted, BAD_REQUEST
// answered), the handler's value as the reply body exactly, refusals as their error reply, other
// failures as INTERNAL counted as handler_error, request patterns in one queue group (one replica
// answers), events to every subscriber.
import 'reflect-metadata';
import { Controller, INestMicroservice, Module, UseFilters } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { z } from 'zod';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { Inbound } from '@cmesh/protocol/kit';
import { errorReply } from '@cmesh/protocol';
import { InboundErrors, InboundTransport } from '@cmesh/protocol/nest';

class Refused extends Error {}

/** what every instance saw: handler calls, rejections, warnings */
const seen = { calls: [] as string[], events: [] as string[], counts: [] as string[], warnings: [] as string[] };

@Controller()
@UseFilters(InboundErrors)
class Demo {
  @MessagePattern('demo.echo', { schema: z.object({ n: z.number().int() }) })
  echo({ n }: { n: number }) {
    seen.calls.push(`echo ${n}`);
    return { ok: true, twice: 2 * n };
  }

  @MessagePattern('demo.fail', { schema: z.object({ how: z.enum(['refuse', 'throw', 'reject']) }) })
  async fail({ how }: { how: string }) {
    if (how === 'refuse') throw new Refused('no such thing');
    if (how === 'throw') throw new Error('boom');
    await Promise.reject(new TypeError('late boom'));
  }

  @EventPattern('demo.tick', { schema: z.object({ i: z.number() }) })
  tick({ i }: { i: number }) {
    seen.events.push(`tick ${i}`);
  }
}

@Module({ controllers: [Demo] })
class DemoModule {}

describe('InboundTransport (real nats-server)', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  const services: INestMicroservice[] = [];
  const conns: NatsConnection[] = [];

  const start = async () => {
    const own = await connect({ servers: nats.url });
    conns.push(own);
    const inbound = new Inbound({
      count: (subject, reason) => seen.counts.push(`${subject} ${reason}`),
      warn: (line) => seen.warnings.push(line),
      refusal: (e) => (e instanceof Refused ? errorReply('NOT_FOUND', e.message) : undefined),
    });
    const strategy = new InboundTransport({ connection: () => own, inbound: () => inbound, subject: (p) => `t.${p}`, requestQueue: 'q' });
    const ms = await NestFactory.createMicroservice(DemoModule, { strategy, logger: false });
    await ms.listen();
    services.push(ms);
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await start();
    await start();
  });
  afterAll(async () => {
    for (const s of services) await s.close();
    for (const c of conns) await c.close();
    await nc?.close();
    await nats?.stop();
  });

  const req = async (subject: string, body: string) =>
    JSON.parse(new TextDecoder().decode((await nc.request(subject, new TextEncoder().encode(body), { timeout: 3000 })).data));

  it('answers a request sent the moment listen() returns (the server has the subscriptions by then)', async () => {
    for (let i = 0; i < 10; i++) {
      const own = await connect({ servers: nats.url });
      conns.push(own);
      const strategy = new InboundTransport({
        connection: () => own,
        inbound: () => new Inbound({ count: () => undefined, warn: () => undefined }),
        subject: (p) => `fresh${i}.${p}`,
        requestQueue: 'q',
      });
      const ms = await NestFactory.createMicroservice(DemoModule, { strategy, logger: false });
      await ms.listen();
      services.push(ms);
      expect(await req(`fresh${i}.demo.echo`, JSON.stringify({ n: i }))).toEqual({ ok: true, twice: 2 * i });
    }
  });

  it("answers with the handler's value as the body, once per request across the queue group", async () => {
    seen.calls.length = 0;
    for (let n = 0; n < 20; n++) expect(await req('t.demo.echo', JSON.stringify({ n }))).toEqual({ ok: true, twice: 2 * n });
    expect(seen.calls.sort()).toEqual(Array.from({ length: 20 }, (_, n) => `echo ${n}`).sort());
  });

  it('rejects what Inbound rejects: BAD_REQUEST, counted, the handler not called', async () => {
    seen.calls.length = 0;
    seen.counts.length = 0;
    expect(await req('t.demo.echo', '{nope')).toEqual(errorReply('BAD_REQUEST', 't.demo.echo: body is not valid JSON'));
    expect(await req('t.demo.echo', '{"n":"x"}')).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST', issues: [expect.stringMatching(/^n: /)] } });
    expect(seen.calls).toEqual([]);
    expect(seen.counts).toEqual(['t.demo.echo not_json', 't.demo.echo invalid']);
  });

  it('answers a refusal with its error reply and any other failure with INTERNAL, counted and logged', async () => {
    seen.counts.length = 0;
    seen.warnings.length = 0;
    expect(await req('t.demo.fail', '{"how":"refuse"}')).toEqual(errorReply('NOT_FOUND', 'no such thing'));
    expect(await req('t.demo.fail', '{"how":"throw"}')).toEqual(errorReply('INTERNAL', 'boom'));
    expect(await req('t.demo.fail', '{"how":"reject"}')).toEqual(errorReply('INTERNAL', 'late boom'));
    expect(seen.counts).toEqual(['t.demo.fail handler_error', 't.demo.fail handler_error']);
    expect(seen.warnings.join('\n')).toMatch(/t\.demo\.fail: handler failed: Error: boom/);
  });

  it('delivers an event to every instance (no queue group)', async () => {
    seen.events.length = 0;
    nc.publish('t.demo.tick', new TextEncoder().encode('{"i":1}'));
    nc.publish('t.demo.tick', new TextEncoder().encode('{"i":"bad"}'));
    await nc.flush();
    for (let end = Date.now() + 3000; seen.events.length < 2 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(seen.events).toEqual(['tick 1', 'tick 1']);
  });

  it('refuses to start a pattern without a schema, naming it', async () => {
    @Controller()
    class NoSchema {
      @MessagePattern('demo.bare')
      bare() {
        return 1;
      }
    }
    @Module({ controllers: [NoSchema] })
    class BareModule {}
    const strategy = new InboundTransport({
      connection: () => nc,
      inbound: () => new Inbound({ count: () => undefined, warn: () => undefined }),
      subject: (p) => p,
    });
    const ms = await NestFactory.createMicroservice(BareModule, { strategy, logger: false });
    await expect(ms.listen()).rejects.toThrow("NATS pattern demo.bare: no schema in the decorator's extras");
    await ms.close();
  });
});
