// `cmesh scan`: find the bad node. The coordinator measures every pair of agents (POST /scans),
// then this prints the matrix, the ring all-reduces, the flagged agents and links and the verdict
// (`--json`: the scan record); `--list` lists the stored scans.
import { Command } from 'commander';
import { printableJson, ScanRecord, ScanRequestInput } from '@cmesh/protocol';
import { parseSize } from '../bench/options';
import { DEFAULT_COORDINATOR, MeshClient, clientToken } from '../mesh/client';
import { renderScan, renderScanList, useColour } from '../mesh/scan-view';

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
}

export function scanRequest(o: ScanOptions): ScanRequestInput {
  return {
    ...(o.agents ? { agents: o.agents.split(',').map((s) => s.trim()).filter(Boolean) } : {}),
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
export async function runScan(client: MeshClient, req: ScanRequestInput, opts: { timeoutMs: number; onProgress?: (s: ScanRecord) => void }): Promise<ScanRecord> {
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
    .option('--token-file <path>', "file holding the coordinator's bearer token (or CMESH_API_TOKEN / CMESH_API_TOKEN_FILE; default for a local coordinator: cmesh up's)")
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
    .action(async (o: ScanOptions) => {
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
      process.stdout.write(o.json ? printableJson(s, 2) + '\n' : renderScan(s, useColour()));
      if (s.state !== 'succeeded') process.exitCode = 1;
    });
}
