// Live flight recorder: a rank started by `cmesh run --rdzv-backend nats` or by a rank agent
// answers the coordinator's trace requests on NATS (CMESH_TRACE_NATS_URL, CMESH_TRACE_SUBJECT: the
// launcher builds the subject in the cluster's namespace) with its summary, from its own event
// loop, whatever it is waiting in. Started only when the launcher asks. With a data-plane secret,
// each answer carries a MAC (answer-mac.ts) that the coordinator checks against its job's secret.
import { InvalidArgumentError } from '../errors';
import type { WorldTrace } from './world-trace';
import { NATS_RECONNECT, natsLogin, natsServers } from '../rendezvous/nats-credentials';
import { loadNatsTransport } from '../rendezvous/nats-client';
import type { MsgHdrs } from '@nats-io/nats-core';
import { TRACE_MAC_HEADER, TRACE_NONCE_MAX, traceAnswerKey, traceAnswerMac } from './answer-mac';

export const TRACE_NATS_URL_ENV = 'CMESH_TRACE_NATS_URL';
export const TRACE_SUBJECT_ENV = 'CMESH_TRACE_SUBJECT';

/** A trace request's body: every rank answers, or those of one job (run id, job id) when `job` is set. */
export interface TraceRequest {
  job?: string;
  /** the collector's random nonce: a signed answer covers it (an old answer cannot be replayed) */
  nonce?: string;
}

const MAX_REQUEST_BYTES = 4096;

export interface TraceResponder {
  close(): Promise<void>;
}

export async function startTraceResponder(trace: WorldTrace, env: NodeJS.ProcessEnv = process.env, secret?: string): Promise<TraceResponder | undefined> {
  const url = env[TRACE_NATS_URL_ENV];
  if (!url) return undefined;
  const subject = env[TRACE_SUBJECT_ENV];
  if (!subject) throw new InvalidArgumentError(`${TRACE_NATS_URL_ENV} is set but ${TRACE_SUBJECT_ENV} is not: the subject to answer on is needed`);
  const nats = loadNatsTransport('the trace responder', (m) => new InvalidArgumentError(`${TRACE_NATS_URL_ENV} is set: ${m}`));
  const nc = await nats.connect({ ...natsLogin(), ...NATS_RECONNECT, servers: natsServers(url), name: `cmesh-trace-rank-${trace.opts.rank}`, timeout: 5000 });
  const enc = new TextEncoder();
  // the process group's data-plane secret: the coordinator that made it can check our answers
  const key = secret ? traceAnswerKey(secret) : undefined;
  nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      // nothing thrown here may reach nats.js (its dispatch loop would stop reading for good)
      try {
        // a JetStream consumer can deliver a bucket's bytes here with the bucket's subject on them
        if (msg.subject !== subject) return;
        const req = traceRequest(msg.data);
        if (!req || (req.job !== undefined && req.job !== trace.job) || !msg.reply) return;
        const data = enc.encode(JSON.stringify(trace.summary()));
        let headers: MsgHdrs | undefined;
        if (key) {
          headers = nats.headers();
          headers.set(TRACE_MAC_HEADER, traceAnswerMac(key, req.nonce ?? '', data));
        }
        msg.respond(data, headers ? { headers } : undefined);
      } catch {
        // the connection is closing, or the summary could not be built: no answer, as if busy
      }
    },
  });
  // the server has the subscription once this returns: a request made right after finds this rank
  await nc.flush();
  return {
    close: async () => {
      await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * A trace request's body, or undefined for one this rank stays silent on: many ranks hear one
 * request, so a rank does not answer anything it cannot read (not JSON, not an object, over
 * 4 KiB, a job or nonce that is not a short string), so that the collector is not flooded with
 * one refusal per rank.
 */
function traceRequest(data: Uint8Array): TraceRequest | undefined {
  if (data.length > MAX_REQUEST_BYTES) return undefined;
  let body: unknown = {};
  try {
    if (data.length) body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data)) as unknown;
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { job, nonce } = body as Record<string, unknown>;
  if (job !== undefined && typeof job !== 'string') return undefined;
  if (nonce !== undefined && (typeof nonce !== 'string' || nonce.length > TRACE_NONCE_MAX)) return undefined;
  return { job, nonce };
}
