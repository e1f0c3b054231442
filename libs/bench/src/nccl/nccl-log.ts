// What NCCL's own log (NCCL_DEBUG=INFO) says about a rank: the device its communicator runs on
// ("... rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 ... - Init COMPLETE") and the transport of
// each channel to a peer ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "via SHM/direct/direct",
// "[send] via NET/IB/0"). A first run on several GPUs reads these to see that each rank got its
// own GPU and that ranks of one node talk over NVLink/PCIe (P2P) or shared memory, not the network.

export interface NcclInit {
  rank: number;
  nranks: number;
  cudaDev: number;
  busId: string | null;
}

export interface NcclChannel {
  from: number;
  to: number;
  /** NCCL's transport path as printed: P2P/IPC, P2P/CUMEM/read, P2P/direct pointer/read, SHM/direct/direct, NET/Socket/0, NET/IB/0/GDRDMA, ... */
  via: string;
}

/** The transport's family: the first part of its path (P2P, SHM, NET, COLLNET, NVLS). */
export function transportKind(via: string): string {
  return via.split('/')[0];
}

const INIT = / NCCL INFO .*\brank (\d+) n[Rr]anks (\d+) cudaDev (\d+)(?: nvmlDev \d+)?(?: busId (\S+))?.* Init COMPLETE/;
// the path may hold a space ("P2P/direct pointer/read"): up to the end of the line
const CHANNEL = / NCCL INFO Channel \d+(?:\/\d+)? : (\d+)\[[^\]]*\] -> (\d+)\[[^\]]*\](?: \[(?:send|receive)\])? via (.+?)\s*$/;

export interface NcclLogSummary {
  inits: NcclInit[];
  channels: NcclChannel[];
}

export function parseNcclLog(lines: Iterable<string>): NcclLogSummary {
  const inits: NcclInit[] = [];
  const channels: NcclChannel[] = [];
  for (const line of lines) {
    let m = INIT.exec(line);
    if (m) {
      inits.push({ rank: Number(m[1]), nranks: Number(m[2]), cudaDev: Number(m[3]), busId: m[4] ?? null });
      continue;
    }
    m = CHANNEL.exec(line);
    if (m) channels.push({ from: Number(m[1]), to: Number(m[2]), via: m[3] });
  }
  return { inits, channels };
}

/** Distinct transports by family, e.g. { P2P: ['P2P/IPC'], NET: ['NET/IB/0'] }. */
export function transportsByKind(channels: readonly NcclChannel[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const c of channels) {
    const k = transportKind(c.via);
    const list = (out[k] ??= []);
    if (!list.includes(c.via)) list.push(c.via);
  }
  return out;
}
