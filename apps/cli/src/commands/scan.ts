// `cmesh scan`: find the bad node. The coordinator measures every pair of agents (POST /scans),
// then this prints the matrix, the ring all-reduces, the flagged agents and links and the verdict
// (`--json`: the scan record); `--list` lists the stored scans. With thresholds (--fail-on-flagged,
// --min-busbw, --min-link-bw (or per class: --min-intra-node-link-bw, --min-inter-node-link-bw),
// --max-latency) it is a pre-flight check before a job: exit 0 when the
// fabric meets them, 1 when it does not or the scan did not succeed (2: a usage error).
import { Command } from 'commander';
import { evaluateScanGate, printableDeep, printableJson, ScanGate, ScanGateResult, ScanRecord, ScanRequestInput } from '@cmesh/protocol';
import { parseSize } from '../bench/options';
import { DEFAULT_COORDINATOR, MeshClient, clientToken } from '../mesh/client';
import { renderScan, renderScanList, useColour } from '../mesh/scan-view';
import { UsageError } from '../usage';

interface ScanOptions {
  coordinator: string;
  tokenFile?: string;
  agents?: string;
  latencySize: string;
  bandwidthSize: string;
  iters: string;
  warmup: string;
  backend: string;
  collectives: boolean;
  slowRatio: string;
  timeout: string;
  json?: boolean;
  list?: boolean;
  limit: string;
  show?: string;
  progress: boolean;
  failOnFlagged?: boolean;
  minBusbw?: string;
  minLinkBw?: string;
  minIntraNodeLinkBw?: string;
  minInterNodeLinkBw?: string;
  maxLatency?: string;
}

function number(flag: string, v: string, positive: boolean): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || (positive && n === 0))
    throw new UsageError(`${flag} must be a ${positive ? 'positive' : 'non-negative'} number, got ${JSON.stringify(v)}`);
  return n;
}

/** The thresholds the flags ask for; undefined when none (a plain scan). */
export function scanGate(
  o: Pick<ScanOptions, 'failOnFlagged' | 'minBusbw' | 'minLinkBw' | 'minIntraNodeLinkBw' | 'minInterNodeLinkBw' | 'maxLatency'>,
): ScanGate | undefined {
  const none = [o.minBusbw, o.minLinkBw, o.minIntraNodeLinkBw, o.minInterNodeLinkBw, o.maxLatency].every((v) => v === undefined);
  if (!o.failOnFlagged && none) return undefined;
  return {
    failOnFlagged: !!o.failOnFlagged,
    ...(o.minBusbw !== undefined ? { minBusBwGBs: number('--min-busbw', o.minBusbw, false) } : {}),
    ...(o.minLinkBw !== undefined ? { minLinkBandwidthGBs: number('--min-link-bw', o.minLinkBw, false) } : {}),
    ...(o.minIntraNodeLinkBw !== undefined ? { minIntraNodeLinkBandwidthGBs: number('--min-intra-node-link-bw', o.minIntraNodeLinkBw, false) } : {}),
    ...(o.minInterNodeLinkBw !== undefined ? { minInterNodeLinkBandwidthGBs: number('--min-inter-node-link-bw', o.minInterNodeLinkBw, false) } : {}),
    ...(o.maxLatency !== undefined ? { maxLatencyUs: number('--max-latency', o.maxLatency, true) } : {}),
  };
}

/** The gate's verdict as printed after the scan. */
export function formatGate(g: ScanGateResult): string {
  if (g.passed) return `gate: passed${g.met.length ? ` (${g.met.join('; ')})` : ''}\n`;
  return `gate: FAILED\n${g.failures.map((f) => `  - ${f}\n`).join('')}`;
}

export function scanRequest(o: ScanOptions): ScanRequestInput {
  const gate = scanGate(o);
  return {
    ...(gate ? { gate } : {}),
    ...(o.agents
      ? {
          agents: o.agents
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        }
      : {}),
    latencyBytes: parseSize(o.latencySize),
    bandwidthBytes: parseSize(o.bandwidthSize),
    iters: Number(o.iters),
    warmup: Number(o.warmup),
    backend: o.backend as ScanRequestInput['backend'],
    collectives: o.collectives,
    slowRatio: Number(o.slowRatio),
  };
}

/** Starts a scan and polls it to its end (progress on stderr when it is a terminal). */
export async function runScan(
  client: MeshClient,
  req: ScanRequestInput,
  opts: { timeoutMs: number; onProgress?: (s: ScanRecord) => void },
): Promise<ScanRecord> {
  let s = await client.post<ScanRecord>('/scans', req);
  const deadline = Date.now() + opts.timeoutMs;
  let seen = -1;
  while (s.state === 'running') {
    if (Date.now() > deadline) throw new Error(`scan ${s.id} still running after ${opts.timeoutMs / 1000} s (it goes on: cmesh scan --show ${s.id})`);
    await new Promise((r) => setTimeout(r, 250));
    s = await client.get<ScanRecord>(`/scans/${encodeURIComponent(s.id)}`);
    if (s.progress.done !== seen) {
      seen = s.progress.done;
      opts.onProgress?.(s);
    }
  }
  return s;
}

export function register(program: Command): void {
  program
    .command('scan')
    .description('find the slow agent or link: every pair of agents (sendRecv), ring all-reduce over all and the halves, outliers flagged')
    .option('--coordinator <url>', 'coordinator REST address (or CMESH_COORDINATOR)', DEFAULT_COORDINATOR)
    .option(
      '--token-file <path>',
      "file holding the coordinator's bearer token (or CMESH_API_TOKEN / CMESH_API_TOKEN_FILE; default for a local coordinator: cmesh up's)",
    )
    .option('--agents <names>', 'comma-separated agent names or ids (default: every live idle agent)')
    .option('--latency-size <bytes>', 'latency probe size', '8')
    .option('--bandwidth-size <bytes>', 'bandwidth probe size (K, M, G suffixes)', '4M')
    .option('--iters <n>', 'timed iterations per size and pair', '5')
    .option('--warmup <n>', 'warm-up iterations', '1')
    .option('--backend <name>', 'tcp or nccl', 'tcp')
    .option('--no-collectives', 'skip the ring all-reduce over all agents and the halves')
    .option('--slow-ratio <x>', 'a link below this fraction of the reference may be slow', '0.6')
    .option('--timeout <s>', 'give up waiting after this many seconds', '1800')
    .option('--json', 'print the scan record as JSON')
    .option('--list', 'list the stored scans, newest first')
    .option('--limit <n>', 'scans to list', '20')
    .option('--show <id>', 'print a stored scan')
    .option('--no-progress', 'no progress line on stderr')
    .option('--fail-on-flagged', 'a pre-flight check: exit 1 when any agent or link is flagged slow')
    .option('--min-busbw <GB/s>', 'a pre-flight check: exit 1 when the ring all-reduce over all agents reaches less busbw')
    .option('--min-link-bw <GB/s>', 'a pre-flight check: exit 1 when any link carries less')
    .option(
      '--min-intra-node-link-bw <GB/s>',
      'a pre-flight check: exit 1 when any intra-node link (both agents on one node) carries less; instead of --min-link-bw for those links',
    )
    .option('--min-inter-node-link-bw <GB/s>', 'a pre-flight check: exit 1 when any inter-node link carries less; instead of --min-link-bw for those links')
    .option('--max-latency <us>', "a pre-flight check: exit 1 when any link's latency is higher, microseconds")
    .action(async (o: ScanOptions) => {
      const gate = scanGate(o); // a bad threshold is refused before anything is measured
      const client = new MeshClient(o.coordinator, undefined, clientToken(o.coordinator, o.tokenFile));
      if (o.list) {
        const { scans } = await client.get<{ scans: ScanRecord[] }>(`/scans?limit=${Number(o.limit)}`);
        process.stdout.write(o.json ? printableJson({ scans }, 2) + '\n' : renderScanList(scans));
        return;
      }
      const tty = !!process.stderr.isTTY && o.progress;
      const s = o.show
        ? await client.get<ScanRecord>(`/scans/${encodeURIComponent(o.show)}`)
        : await runScan(client, scanRequest(o), {
            timeoutMs: Number(o.timeout) * 1000,
            onProgress: tty ? (x) => process.stderr.write(`\rscan ${x.id}: ${x.progress.done}/${x.progress.total}`) : undefined,
          });
      if (tty && !o.show) process.stderr.write('\n');
      // a stored scan (--show) is judged here; a new one came back judged by the coordinator
      const verdict = gate ? (o.show || !s.gate ? evaluateScanGate(s, gate) : s.gate) : undefined;
      const record = verdict ? { ...s, gate: verdict } : s;
      process.stdout.write(o.json ? printableJson(record, 2) + '\n' : renderScan(s, useColour()) + (verdict ? formatGate(printableDeep(verdict)) : ''));
      if (s.state !== 'succeeded' || (verdict && !verdict.passed)) process.exitCode = 1;
    });
}
