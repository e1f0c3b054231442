// A real Prometheus (Debian package) on a free loopback port with a generated config and its own
// TSDB directory; ready when /-/ready answers 200; query helpers over the HTTP API; stopped by pid.
// The config is written as JSON, which YAML accepts, so this fixture needs no YAML library.
import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { freePort } from './free-port';

export interface ScrapeJob {
  /** becomes the `job` label */
  job: string;
  /** host:port of each target */
  targets: string[];
  /** extra labels on every series of these targets */
  labels?: Record<string, string>;
  metricsPath?: string;
}

export interface PrometheusOptions {
  jobs?: ScrapeJob[];
  /** absolute paths of rule files (recording and alerting) */
  ruleFiles?: string[];
  /** scrape and rule evaluation interval, e.g. '1s' */
  interval?: string;
  timeoutMs?: number;
  binary?: string;
}

/** One element of an instant vector, as the HTTP API gives it: value is [unix seconds, "number"]. */
export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** The number of a sample. */
export function sampleValue(s: Sample): number {
  return Number(s.value[1]);
}

export interface PrometheusTarget {
  job: string;
  instance: string;
  health: 'up' | 'down' | 'unknown';
  lastError: string;
}

export interface Prometheus {
  url: string;
  port: number;
  pid: number;
  proc: ChildProcess;
  dataDir: string;
  /** instant query; throws with Prometheus' own error text when the expression is rejected */
  query(expr: string): Promise<Sample[]>;
  /** polls `query(expr)` until `ok(samples)` holds (default: any sample); returns the samples, throws after the deadline */
  waitFor(expr: string, timeoutMs?: number, ok?: (s: Sample[]) => boolean): Promise<Sample[]>;
  targets(): Promise<PrometheusTarget[]>;
  /** replaces the scrape jobs and reloads the config (SIGHUP) */
  setJobs(jobs: ScrapeJob[]): Promise<void>;
  /** the rules Prometheus loaded, by group: name, kind, health, last error */
  rules(): Promise<{ group: string; name: string; type: 'recording' | 'alerting'; health: string; lastError?: string; state?: string }[]>;
  stop(): Promise<void>;
}

export function prometheusConfig(jobs: ScrapeJob[], ruleFiles: string[], interval: string): object {
  return {
    global: { scrape_interval: interval, evaluation_interval: interval, scrape_timeout: interval },
    rule_files: ruleFiles,
    scrape_configs: jobs.map((j) => ({
      job_name: j.job,
      metrics_path: j.metricsPath ?? '/metrics',
      static_configs: [{ targets: j.targets, labels: j.labels ?? {} }],
    })),
  };
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const body = (await res.json()) as { status: string; data: T; error?: string; errorType?: string };
  if (body.status !== 'success') throw new Error(`prometheus ${url}: ${body.errorType ?? res.status}: ${body.error ?? 'no error text'}`);
  return body.data;
}

export async function startPrometheus(opts: PrometheusOptions = {}): Promise<Prometheus> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'cmesh-prom-'));
  const configPath = join(dataDir, 'prometheus.json');
  const interval = opts.interval ?? '1s';
  const ruleFiles = opts.ruleFiles ?? [];
  const writeConfig = (jobs: ScrapeJob[]) => writeFileSync(configPath, JSON.stringify(prometheusConfig(jobs, ruleFiles, interval), null, 2));
  writeConfig(opts.jobs ?? []);
  const url = `http://127.0.0.1:${port}`;
  const proc = spawn(
    opts.binary ?? 'prometheus',
    [
      `--config.file=${configPath}`,
      `--storage.tsdb.path=${join(dataDir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let spawnError: Error | null = null;
  proc.once('error', (e) => (spawnError = e));
  const alive = () => proc.exitCode === null && proc.signalCode === null && !spawnError;
  const stop = async () => {
    if (alive() && proc.pid) process.kill(proc.pid, 'SIGTERM');
    const killer = setTimeout(() => alive() && proc.pid && process.kill(proc.pid, 'SIGKILL'), 5000);
    if (!spawnError) await exited;
    clearTimeout(killer);
    rmSync(dataDir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let ready = false;
  while (!ready && Date.now() < deadline && alive()) {
    ready = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2000) })
      .then((r) => r.status === 200)
      .catch(() => false);
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready) {
    const why = spawnError
      ? `cannot start prometheus (is the Debian package installed?): ${(spawnError as Error).message}`
      : `prometheus not ready on port ${port}: ${stderr.trim()}`;
    await stop();
    throw new Error(why);
  }

  const query = async (expr: string): Promise<Sample[]> => {
    const data = await getJson<{ resultType: string; result: unknown }>(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`);
    if (data.resultType === 'scalar') {
      return [{ metric: {}, value: data.result as [number, string] }];
    }
    if (data.resultType !== 'vector') throw new Error(`query ${expr}: expected a vector, got ${data.resultType}`);
    return data.result as Sample[];
  };

  const targets = async (): Promise<PrometheusTarget[]> => {
    const data = await getJson<{ activeTargets: { labels: Record<string, string>; health: PrometheusTarget['health']; lastError: string }[] }>(
      `${url}/api/v1/targets?state=active`,
    );
    return data.activeTargets.map((t) => ({ job: t.labels.job, instance: t.labels.instance, health: t.health, lastError: t.lastError }));
  };

  return {
    url,
    port,
    pid: proc.pid!,
    proc,
    dataDir,
    query,
    async waitFor(expr, timeoutMs = 20_000, ok = (s) => s.length > 0) {
      const end = Date.now() + timeoutMs;
      let last: Sample[] = [];
      for (;;) {
        last = await query(expr);
        if (ok(last)) return last;
        if (Date.now() > end) throw new Error(`prometheus: ${expr} did not reach the expected value in ${timeoutMs} ms; last result ${JSON.stringify(last)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    },
    targets,
    async setJobs(jobs) {
      writeConfig(jobs);
      const want = new Set(jobs.map((j) => j.job));
      process.kill(proc.pid!, 'SIGHUP');
      const end = Date.now() + 10_000;
      for (;;) {
        const have = new Set((await targets()).map((t) => t.job));
        if ([...want].every((j) => have.has(j)) && [...have].every((j) => want.has(j))) return;
        if (Date.now() > end) throw new Error(`prometheus did not load the new scrape jobs ${[...want].join(', ')}: ${stderr.trim()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async rules() {
      const data = await getJson<{ groups: { name: string; rules: { name: string; type: string; health: string; lastError?: string; state?: string }[] }[] }>(
        `${url}/api/v1/rules`,
      );
      return data.groups.flatMap((g) =>
        g.rules.map((r) => ({
          group: g.name,
          name: r.name,
          type: r.type === 'alerting' ? ('alerting' as const) : ('recording' as const),
          health: r.health,
          lastError: r.lastError,
          state: r.state,
        })),
      );
    },
    stop,
  };
}
