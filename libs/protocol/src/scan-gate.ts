// A scan as a pre-flight check before a job lands on the agents: thresholds the finished scan must
// meet (no flagged agent or link, the ring all-reduce's busbw, every link's bandwidth and latency)
// and the verdict, pass or fail with one line per failure. Link bandwidth may have a threshold per
// class: an intra-node link (NVLink, shared memory) and an inter-node one (the network) differ
// tenfold on a GPU node. `cmesh scan --fail-on-flagged
// --min-busbw 1 ...` and `POST /scans` with `gate` use the same thresholds and the same verdict.
import { z } from 'zod';
import type { LinkClass, ScanRecord } from './scans';

export const ScanGateSchema = z.object({
  /** fail when any agent or link is flagged slow */
  failOnFlagged: z.boolean().default(false),
  /** fail when the ring all-reduce over all agents reaches less busbw, GB/s (nccl-tests' busbw) */
  minBusBwGBs: z.number().nonnegative().optional(),
  /** fail when any measured link carries less, GB/s (links of a class with its own threshold below use that one) */
  minLinkBandwidthGBs: z.number().nonnegative().optional(),
  /** fail when any intra-node link (both agents on one node) carries less, GB/s */
  minIntraNodeLinkBandwidthGBs: z.number().nonnegative().optional(),
  /** fail when any inter-node link carries less, GB/s */
  minInterNodeLinkBandwidthGBs: z.number().nonnegative().optional(),
  /** fail when any measured link's latency is above this, microseconds */
  maxLatencyUs: z.number().positive().optional(),
});
export type ScanGate = z.infer<typeof ScanGateSchema>;
export type ScanGateInput = z.input<typeof ScanGateSchema>;

export const ScanGateResultSchema = z.object({
  passed: z.boolean(),
  /** why it failed, one line each: "agent-1 flagged", "busbw 0.41 GB/s < 1 GB/s" */
  failures: z.array(z.string()),
  /** what was checked and met, one line each */
  met: z.array(z.string()),
});
export type ScanGateResult = z.infer<typeof ScanGateResultSchema>;

const gbs = (x: number) => `${+x.toFixed(3)} GB/s`;
const us = (x: number) => `${+x.toFixed(1)} us`;

/** The verdict of `gate` on a scan; a scan that did not succeed, or a link that failed, fails it. */
export function evaluateScanGate(rec: Pick<ScanRecord, 'state' | 'reason' | 'links' | 'collectives' | 'findings'>, gate: ScanGate): ScanGateResult {
  const failures: string[] = [];
  const met: string[] = [];
  if (rec.state !== 'succeeded') failures.push(`scan ${rec.state}${rec.reason ? `: ${rec.reason}` : ''}`);
  for (const l of rec.links) if (l.state === 'failed') failures.push(`link ${l.a}-${l.b} failed${l.reason ? `: ${l.reason}` : ''}`);
  const ok = rec.links.filter((l) => l.state === 'ok');
  if (gate.failOnFlagged) {
    const agents = rec.findings?.flaggedAgents ?? [];
    const links = rec.findings?.flaggedLinks ?? [];
    for (const a of agents) failures.push(`agent ${a} flagged slow`);
    for (const l of links) failures.push(`link ${l.a}-${l.b} flagged slow (${+l.ratio.toFixed(2)}x the ${l.link ? `${classText(l.link)} ` : ''}reference)`);
    if (rec.findings && !agents.length && !links.length) met.push('no agent or link flagged');
  }
  if (gate.minBusBwGBs !== undefined) {
    const all = rec.collectives.find((c) => c.name === 'all');
    if (!all) failures.push('busbw not measured: no ring all-reduce over all agents (collectives off, or fewer than 3 agents)');
    else if (all.state !== 'ok' || all.busBwGBs === undefined)
      failures.push(`busbw not measured: the ring all-reduce over all agents ${all.state}${all.reason ? `: ${all.reason}` : ''}`);
    else if (all.busBwGBs < gate.minBusBwGBs)
      failures.push(`busbw ${gbs(all.busBwGBs)} < ${gbs(gate.minBusBwGBs)} (ring all-reduce over ${all.agents.length} agents)`);
    else met.push(`busbw ${gbs(all.busBwGBs)} >= ${gbs(gate.minBusBwGBs)}`);
  }
  linkBandwidth(ok, gate, failures, met);
  if (gate.maxLatencyUs !== undefined) {
    const max = gate.maxLatencyUs;
    const above = ok.filter((l) => l.latencyUs !== undefined && l.latencyUs > max);
    for (const l of above) failures.push(`link ${l.a}-${l.b} latency ${us(l.latencyUs!)} > ${us(max)}`);
    if (!above.length && ok.length) met.push(`every link <= ${us(max)}`);
  }
  return { passed: failures.length === 0, failures, met };
}

const classText = (c: LinkClass) => c.replace('_', '-');

/** Each link against its class's threshold, else the one for every link; one line per link below. */
function linkBandwidth(ok: ScanRecord['links'], gate: ScanGate, failures: string[], met: string[]): void {
  const own: Record<LinkClass, number | undefined> = { intra_node: gate.minIntraNodeLinkBandwidthGBs, inter_node: gate.minInterNodeLinkBandwidthGBs };
  const groups: { label: string; min: number; links: ScanRecord['links'] }[] = [];
  const rest = ok.filter((l) => !(l.link && own[l.link] !== undefined));
  if (gate.minLinkBandwidthGBs !== undefined) groups.push({ label: '', min: gate.minLinkBandwidthGBs, links: rest });
  for (const c of ['intra_node', 'inter_node'] as const) {
    const min = own[c];
    if (min !== undefined) groups.push({ label: `${classText(c)} `, min, links: ok.filter((l) => l.link === c) });
  }
  for (const g of groups) {
    const below = g.links.filter((l) => l.bandwidthGBs !== undefined && l.bandwidthGBs < g.min);
    for (const l of below) failures.push(`${g.label}link ${l.a}-${l.b} bandwidth ${gbs(l.bandwidthGBs!)} < ${gbs(g.min)}`);
    if (!below.length && g.links.length) met.push(`every ${g.label}link >= ${gbs(g.min)}`);
  }
}
