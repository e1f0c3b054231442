// Scan results as Prometheus gauges, read at scrape time from the newest finished scans in the
// cluster's scans bucket, so every replica exports the same values whichever ran the scan.
// Cardinality is bounded: one series per agent, and per link only the flagged links, or every
// link when the scan had at most CMESH_SCAN_LINK_METRICS_MAX_AGENTS agents. A link's `link` label
// (intra_node or inter_node) follows from its two agents, so it adds no series; the reference has
// one series per class. An agent's ratio is its worst class's (link-classes.ts).
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { LinkClass, ScanRecord } from '@cmesh/protocol';
import { METRICS } from '../metrics/metric-names';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { CoordinatorMetrics } from '../metrics/coordinator-metrics';
import { ScanStore } from './scan-store';

const GB = 1e9;
/** finished scans read per scrape (the last one, and older ones for each agent's previous ratio) */
const LOOKBACK = 5;

/** The gauges' values for the newest finished scans (newest first); pure, for tests and scrapes. */
export function scanSeries(scans: readonly ScanRecord[], maxAgentsForAllLinks: number) {
  const [last, ...older] = scans;
  const agents: { agent: string; ratio: number | null; previous: number | null; flagged: boolean }[] = [];
  const links: { a: string; b: string; flagged: boolean; link?: LinkClass; bytesPerSecond: number; ratio: number }[] = [];
  const references: { link?: LinkClass; bytesPerSecond: number }[] = [];
  if (!last?.findings) return { last: undefined, agents, links, references };
  // per class; a record made before links had classes has one reference for all
  const classes = last.findings.byLink ?? [{ link: undefined, referenceGBs: last.findings.referenceGBs }];
  for (const c of classes) if (c.referenceGBs !== null) references.push({ ...(c.link ? { link: c.link } : {}), bytesPerSecond: c.referenceGBs * GB });
  for (const f of last.findings.agents) {
    const prev = older.map((s) => s.findings?.agents.find((x) => x.agent === f.agent)).find((x) => x && x.ratio !== null);
    agents.push({ agent: f.agent, ratio: f.ratio, previous: prev?.ratio ?? null, flagged: f.flagged });
  }
  const flagged = new Set(last.findings.flaggedLinks.map((l) => `${l.a}\0${l.b}`));
  const all = last.agents.length <= maxAgentsForAllLinks;
  for (const l of last.links) {
    const isFlagged = flagged.has(`${l.a}\0${l.b}`);
    if ((!all && !isFlagged) || l.bandwidthGBs === undefined || l.ratio === undefined) continue;
    links.push({ a: l.a, b: l.b, flagged: isFlagged, ...(l.link ? { link: l.link } : {}), bytesPerSecond: l.bandwidthGBs * GB, ratio: l.ratio });
  }
  return { last, agents, links, references };
}

@Injectable()
export class ScanMetrics implements OnModuleInit {
  constructor(
    private readonly metrics: CoordinatorMetrics,
    private readonly store: ScanStore,
    @Inject(COORDINATOR_CONFIG) private readonly config: CoordinatorConfig,
  ) {}

  onModuleInit(): void {
    const r = [this.metrics.registry];
    const m = METRICS;
    const store = this.store;
    const maxAgents = this.config.scanLinkMetricsMaxAgents;
    // the registry asks every gauge at once: one read of the bucket per scrape fills them all
    let pending: Promise<void> | null = null;
    const refresh = () => (pending ??= fill().finally(() => (pending = null)));
    const g = (d: { name: string; help: string; labels: readonly string[] }) =>
      new Gauge({
        name: d.name,
        help: d.help,
        labelNames: [...d.labels],
        registers: r,
        collect: () => refresh(),
      });
    const ratio = g(m.scanAgentBandwidthRatio);
    const previous = g(m.scanAgentPreviousBandwidthRatio);
    const flagged = g(m.scanAgentFlagged);
    const linkBw = g(m.scanLinkBandwidth);
    const linkRatio = g(m.scanLinkRatio);
    const reference = g(m.scanReference);
    const duration = g(m.scanDuration);
    const lastAt = g(m.scanLastTimestamp);
    const flaggedAgents = g(m.scanFlaggedAgents);
    const flaggedLinks = g(m.scanFlaggedLinks);
    async function fill(): Promise<void> {
      const scans = await store.list(LOOKBACK, true).catch(() => [] as ScanRecord[]);
      for (const x of [ratio, previous, flagged, linkBw, linkRatio, reference, duration, lastAt, flaggedAgents, flaggedLinks]) x.reset();
      const s = scanSeries(scans, maxAgents);
      if (!s.last?.findings) return;
      for (const a of s.agents) {
        if (a.ratio !== null) ratio.set({ agent: a.agent }, a.ratio);
        if (a.previous !== null) previous.set({ agent: a.agent }, a.previous);
        flagged.set({ agent: a.agent }, a.flagged ? 1 : 0);
      }
      for (const l of s.links) {
        const labels = { agent_a: l.a, agent_b: l.b, flagged: String(l.flagged), ...(l.link ? { link: l.link } : {}) };
        linkBw.set(labels, l.bytesPerSecond);
        linkRatio.set(labels, l.ratio);
      }
      for (const x of s.references) reference.set(x.link ? { link: x.link } : {}, x.bytesPerSecond);
      if (s.last.wallMs !== undefined) duration.set(s.last.wallMs / 1000);
      if (s.last.finishedAt) lastAt.set(Date.parse(s.last.finishedAt) / 1000);
      flaggedAgents.set(s.last.findings.flaggedAgents.length);
      flaggedLinks.set(s.last.findings.flaggedLinks.length);
    }
  }
}
