// Opt-in metrics for a user's own program (`cmesh run` job): every collective this process runs is
// recorded under the same names the agents use and served on /metrics. Started only when asked:
// by the program (startMetricsExporter(), or startExporterFromEnv() to honour CMESH_METRICS_PORT
// as the agents' job workers do), or by the launcher: `cmesh run --metrics-port N` (default:
// CMESH_METRICS_PORT, read by the launcher) sets CMESH_RUN_METRICS_PORT (N + LOCAL_RANK) and
// CMESH_RUN_METRICS_HOST for each rank, and initProcessGroup starts that one. CMESH_METRICS_PORT
// alone starts nothing in the library.
import * as http from 'http';
import { InvalidArgumentError } from '../errors';
import { CollectiveEvent, addCollectiveObserver } from '../observers';
import { CounterVec, HistogramVec, escapeLabel } from './exposition';
import { COLLECTIVE_METRICS, DURATION_BUCKETS, opLabel, sizeBucket } from './names';
import { FlightRecorder, flightRecorder } from '../trace/recorder';

export interface MetricsExporter {
  port: number;
  url: string;
  close(): Promise<void>;
}

export class CollectiveMetrics {
  readonly duration = new HistogramVec(COLLECTIVE_METRICS.collectiveDuration.name, COLLECTIVE_METRICS.collectiveDuration.help, DURATION_BUCKETS);
  readonly bytes = new CounterVec(COLLECTIVE_METRICS.collectiveBytes.name, COLLECTIVE_METRICS.collectiveBytes.help);
  readonly payload = new CounterVec(COLLECTIVE_METRICS.collectivePayloadBytes.name, COLLECTIVE_METRICS.collectivePayloadBytes.help);
  readonly errors = new CounterVec(COLLECTIVE_METRICS.collectiveErrors.name, COLLECTIVE_METRICS.collectiveErrors.help);

  /**
   * recorder: where the oldest in-flight op's age is read at each scrape (the process's, by
   * default); cluster: the `cluster` label of every series, as the coordinator and agents label theirs
   */
  constructor(
    private readonly recorder: () => FlightRecorder = flightRecorder,
    private readonly cluster: string = DEFAULT_METRICS_CLUSTER,
  ) {}

  record(e: CollectiveEvent): void {
    const op = opLabel(e.op);
    const cluster = this.cluster;
    this.duration.observe({ cluster, op, backend: e.backend, algorithm: e.algorithm, dtype: e.dtype, size_bucket: sizeBucket(e.bytes) }, e.durationSeconds);
    this.bytes.inc({ cluster, op, backend: e.backend, direction: 'sent' }, e.bytesSent);
    this.bytes.inc({ cluster, op, backend: e.backend, direction: 'received' }, e.bytesReceived);
    this.payload.inc({ cluster, op, backend: e.backend }, e.bytes);
    if (e.error) this.errors.inc({ cluster, op, reason: e.error.code }); // the same codes the agents report
  }

  render(): string {
    return `${[this.duration, this.bytes, this.payload, this.errors].map((m) => m.render()).join('\n')}\n${this.renderInflight()}`;
  }

  /** Read at scrape time: nothing on the collectives' path. Absent until the process has a rank. */
  private renderInflight(): string {
    const rec = this.recorder();
    if (!rec.enabled || rec.rank < 0) return '';
    const oldest = rec.oldestInFlight();
    const age = oldest ? Math.max(0, (performance.now() - oldest.started) / 1000) : 0;
    const m = COLLECTIVE_METRICS.collectiveOldestInflightAge;
    return `# HELP ${m.name} ${m.help}\n# TYPE ${m.name} gauge\n${m.name}{cluster="${escapeLabel(this.cluster)}",rank="${rec.rank}"} ${age}\n`;
  }
}

/** The cluster label of a program that names none (CMESH_CLUSTER unset): the mesh's default cluster. */
export const DEFAULT_METRICS_CLUSTER = 'default';

/** cluster: the `cluster` label of every series (default: DEFAULT_METRICS_CLUSTER) */
export async function startMetricsExporter(opts: { port: number; host?: string; cluster?: string }): Promise<MetricsExporter> {
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535)
    throw new InvalidArgumentError(`metrics port must be in [0, 65535], got ${opts.port}`);
  const metrics = new CollectiveMetrics(flightRecorder, opts.cluster || DEFAULT_METRICS_CLUSTER);
  const unsubscribe = addCollectiveObserver((e) => metrics.record(e));
  const server = http.createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('try /metrics\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }).end(metrics.render());
  });
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(opts.port, host, resolve));
  // never keeps a finished program alive: neither the listener nor a scraper's keep-alive connection
  server.unref();
  server.on('connection', (socket) => socket.unref());
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: `http://${host}:${port}/metrics`,
    close: async () => {
      unsubscribe();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Set by `cmesh run --metrics-port` for each rank: the port (and host) its exporter serves on. */
export const LAUNCHER_METRICS_PORT_ENV = 'CMESH_RUN_METRICS_PORT';
export const LAUNCHER_METRICS_HOST_ENV = 'CMESH_RUN_METRICS_HOST';

/** The exporter `cmesh run` asked for (CMESH_RUN_METRICS_PORT), if it asked; initProcessGroup calls it. */
export async function startLauncherExporter(env: NodeJS.ProcessEnv = process.env): Promise<MetricsExporter | undefined> {
  const raw = env[LAUNCHER_METRICS_PORT_ENV];
  if (raw === undefined || raw === '') return undefined;
  return startMetricsExporter({ port: Number(raw), host: env[LAUNCHER_METRICS_HOST_ENV] || '127.0.0.1', cluster: env.CMESH_CLUSTER });
}

/**
 * CMESH_METRICS_PORT (+ LOCAL_RANK) and CMESH_METRICS_HOST, when a program asks for them: the
 * agents' job workers call it; the library never does on its own.
 */
export async function startExporterFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<MetricsExporter | undefined> {
  if (!env.CMESH_METRICS_PORT) return undefined;
  const base = Number(env.CMESH_METRICS_PORT);
  const port = base === 0 ? 0 : base + Number(env.LOCAL_RANK ?? 0);
  return startMetricsExporter({ port, host: env.CMESH_METRICS_HOST ?? '127.0.0.1', cluster: env.CMESH_CLUSTER });
}
