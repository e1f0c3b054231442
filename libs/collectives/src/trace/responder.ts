// Live flight recorder: a rank started by `cmesh run --rdzv-backend nats` or by a rank agent
// answers the coordinator's trace requests on NATS (CMESH_TRACE_NATS_URL, CMESH_TRACE_SUBJECT: the
// launcher builds the subject in the cluster's namespace) with its summary, from its own event
// loop, whatever it is waiting in. Started only when the launcher asks.
import { InvalidArgumentError } from '../errors';
import type { WorldTrace } from './world-trace';
import { natsLogin } from '../rendezvous/nats-credentials';

export const TRACE_NATS_URL_ENV = 'CMESH_TRACE_NATS_URL';
export const TRACE_SUBJECT_ENV = 'CMESH_TRACE_SUBJECT';

/** A trace request's body: every rank answers, or those of one job (run id, job id) when `job` is set. */
export interface TraceRequest {
  job?: string;
}

const MAX_REQUEST_BYTES = 4096;

export interface TraceResponder {
  close(): Promise<void>;
}

export async function startTraceResponder(trace: WorldTrace, env: NodeJS.ProcessEnv = process.env): Promise<TraceResponder | undefined> {
  const url = env[TRACE_NATS_URL_ENV];
  if (!url) return undefined;
  const subject = env[TRACE_SUBJECT_ENV];
  if (!subject) throw new InvalidArgumentError(`${TRACE_NATS_URL_ENV} is set but ${TRACE_SUBJECT_ENV} is not: the subject to answer on is needed`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer dependency, loaded only when asked
  const nats = require('nats') as typeof import('nats');
  const nc = await nats.connect({ ...natsLogin(), servers: url, name: `cmesh-trace-rank-${trace.opts.rank}`, timeout: 5000, maxReconnectAttempts: -1 });
  const enc = new TextEncoder();
  nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      // Many ranks hear one request: a rank answers only a request for it, and stays silent on
      // anything else (not JSON, not an object, over 4 KiB, another job's), so that the collector
      // is not flooded with one refusal per rank.
      let body: unknown = {};
      try {
        if (msg.data.length > MAX_REQUEST_BYTES) return;
        if (msg.data.length) body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(msg.data)) as unknown;
      } catch {
        return;
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
      const job = (body as TraceRequest).job;
      if (job !== undefined && job !== trace.job) return;
      if (!msg.reply) return;
      msg.respond(enc.encode(JSON.stringify(trace.summary())));
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
