// The coordinator's REST API as `cmesh status`, `bench --mesh` and `demo` use it.
import { randomUUID } from 'crypto';
import { existsSync, readFileSync } from 'fs';
import { IDEMPOTENCY_KEY_HEADER, JobRecord, JobRequestInput, isFinished } from '@cmesh/protocol';
import { readSecretSetting } from '@cmesh/protocol/kit';
import { UsageError } from '../usage';
import { stateDirFiles } from './state-dir';

export const DEFAULT_COORDINATOR = process.env.CMESH_COORDINATOR || 'http://127.0.0.1:7700';

/** How long submitJob sends a submission again while its answer may have been lost. */
const SUBMIT_RETRY_MS = 30_000;

/** No answer (0), or one that says try again (502, 503, 504): the request may have acted, so only a keyed request is sent again. */
export const answerMayBeLost = (status: number) => status === 0 || status === 502 || status === 503 || status === 504;

export class MeshApiError extends Error {
  override name = 'MeshApiError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The bearer token the CLI sends: CMESH_API_TOKEN, else the file --token-file (or
 * CMESH_API_TOKEN_FILE) names, else, for a coordinator on this machine, the one `cmesh up` keeps in
 * its state directory. No flag takes the token itself: `ps` would show it to every user.
 */
export function clientToken(coordinator: string, tokenFile?: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const read = (p: string) => readFileSync(p, 'utf8');
  const given = readSecretSetting(
    'CMESH_API_TOKEN',
    { CMESH_API_TOKEN: env.CMESH_API_TOKEN, CMESH_API_TOKEN_FILE: tokenFile ?? env.CMESH_API_TOKEN_FILE },
    read,
  );
  if (given) return given;
  let host = '';
  try {
    host = new URL(coordinator).hostname;
  } catch {
    return undefined;
  }
  // a local mesh's own token goes to a local coordinator only
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(host)) return undefined;
  const file = stateDirFiles(env).apiToken;
  return existsSync(file) ? read(file).trim() || undefined : undefined;
}

/** The coordinator's address as given (--coordinator or CMESH_COORDINATOR), checked: an http(s) URL. */
function coordinatorBase(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) {
    throw new UsageError(
      `coordinator address ${JSON.stringify(text)} (--coordinator or CMESH_COORDINATOR) is not an http:// or https:// URL; e.g. http://127.0.0.1:7700`,
    );
  }
  return text.replace(/\/+$/, '');
}

export class MeshClient {
  readonly base: string;

  constructor(
    base = DEFAULT_COORDINATOR,
    private readonly timeoutMs = 10_000,
    private readonly token: string | undefined = clientToken(base),
  ) {
    this.base = coordinatorBase(base);
  }

  private async call<T>(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<T> {
    let res: Response | undefined;
    for (let attempt = 0; !res; attempt++) {
      try {
        res = await fetch(this.base + path, {
          method,
          headers: {
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
            ...extraHeaders,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (e) {
        const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
        // a kept-alive socket the server closed just as we reused it: a GET is safe to send again
        if (method === 'GET' && attempt === 0 && (cause === 'UND_ERR_SOCKET' || cause === 'ECONNRESET')) continue;
        throw new MeshApiError(0, `coordinator ${this.base} unreachable (${cause}); is the mesh up (cmesh up)?`);
      }
    }
    const text = await res.text();
    let data: unknown = undefined;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = text;
    }
    if (!res.ok) {
      const d = data as { error?: unknown; message?: unknown; issues?: unknown } | undefined;
      let msg = typeof d?.error === 'string' && d.error !== 'Not Found' ? d.error : typeof d?.message === 'string' ? d.message : text;
      // validation errors name the offending fields: show them
      if (Array.isArray(d?.issues) && d.issues.length) msg += ` (${d.issues.join('; ')})`;
      throw new MeshApiError(res.status, `${method} ${path}: ${res.status} ${msg}`);
    }
    return data as T;
  }

  get<T>(path: string): Promise<T> {
    return this.call<T>('GET', path);
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>('POST', path, body);
  }

  /**
   * Submits a job under an idempotency key (a new one per call unless given) and sends it again,
   * with the same key, while its answer may have been lost (the coordinator unreachable, timed out
   * or 503) for up to `retryForMs`: the coordinator answers a retry with the job the first attempt
   * made, so the job runs once however many attempts reach it.
   */
  async submitJob(req: JobRequestInput, opts: { idempotencyKey?: string; retryForMs?: number } = {}): Promise<JobRecord> {
    const key = opts.idempotencyKey ?? randomUUID();
    const deadline = Date.now() + (opts.retryForMs ?? SUBMIT_RETRY_MS);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.call<JobRecord>('POST', '/jobs', req, { [IDEMPOTENCY_KEY_HEADER]: key });
      } catch (e) {
        if (!(e instanceof MeshApiError && answerMayBeLost(e.status)) || Date.now() >= deadline) throw e;
        await new Promise((r) => setTimeout(r, Math.min(200 * 2 ** attempt, 2000, Math.max(0, deadline - Date.now()))));
      }
    }
  }

  job(id: string): Promise<JobRecord> {
    return this.call('GET', `/jobs/${encodeURIComponent(id)}`);
  }

  async jobs(limit = 10): Promise<JobRecord[]> {
    return (await this.call<{ jobs: JobRecord[] }>('GET', `/jobs?limit=${limit}`)).jobs;
  }

  /** Polls the job until it ends; onUpdate sees every new state (rows as they arrive). */
  async waitJob(id: string, onUpdate?: (j: JobRecord) => void, opts: { pollMs?: number; timeoutMs?: number } = {}): Promise<JobRecord> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30 * 60_000);
    let lastKey = '';
    for (;;) {
      const j = await this.job(id);
      const key = `${j.state}/${j.rows.length}/${j.members.length}`;
      if (key !== lastKey) {
        lastKey = key;
        onUpdate?.(j);
      }
      if (isFinished(j.state)) return j;
      if (Date.now() > deadline) throw new MeshApiError(0, `job ${id} still ${j.state} after ${opts.timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 100));
    }
  }
}
