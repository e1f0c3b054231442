// A scan's links in two classes, intra-node (both agents on one node: NVLink/PCIe, shared memory)
// and inter-node (the network), each judged against its own reference with outliers.ts. On a node
// with NVLink the intra-node links run ten times the inter-node ones; one reference over both
// would flag every inter-node link, or hide a slow NVLink behind the network's pace.
import type { LinkClass, ScanAgentFinding, ScanClassFindings, ScanFindings, ScanLink } from '@cmesh/protocol';
import { LINK_CLASSES } from '@cmesh/protocol';
import { LinkInput, OutlierOptions, findOutliers, median } from './outliers';

/** intra_node when both agents named the same node; an agent that named none is a node of its own. */
export function linkClass(a: string, b: string, nodes: Readonly<Record<string, string>>): LinkClass {
  const na = nodes[a];
  return na !== undefined && na === nodes[b] ? 'intra_node' : 'inter_node';
}

/** How people write a class: "intra-node", "inter-node". */
const classText = (c: LinkClass) => c.replace('_', '-');

type ClassedLink = LinkInput & Pick<ScanLink, 'link'>;
const classOf = (l: ClassedLink): LinkClass => l.link ?? 'inter_node';

function classFindings(link: LinkClass, agents: readonly string[], links: readonly ClassedLink[], opts: OutlierOptions) {
  const mine = agents.filter((a) => links.some((l) => l.a === a || l.b === a));
  const r = findOutliers(mine, links, opts);
  const lat = links.filter((l) => l.state === 'ok' && l.latencyUs !== undefined).map((l) => l.latencyUs!);
  const byLink: ScanClassFindings = {
    link,
    links: links.length,
    measured: links.filter((l) => l.state === 'ok' || l.state === 'failed').length,
    medianLatencyUs: median(lat),
    ...r.findings,
    flaggedLinks: r.findings.flaggedLinks.map((f) => ({ ...f, link })),
  };
  return { byLink, links: r.links };
}

/** The findings of a scan whose links carry their class, and each link's ratio (to its class's reference) and slowness, in input order. */
export function classifiedOutliers(
  agents: readonly string[],
  links: readonly ClassedLink[],
  opts: OutlierOptions = {},
): { findings: ScanFindings; links: { ratio?: number; slow?: boolean }[] } {
  const present = LINK_CLASSES.filter((c) => links.some((l) => classOf(l) === c));
  if (present.length <= 1) {
    const r = findOutliers(agents, links, opts);
    if (!present.length) return r;
    const one = classFindings(present[0], agents, links, opts).byLink;
    return { findings: { ...r.findings, flaggedLinks: one.flaggedLinks, byLink: [one] }, links: r.links };
  }
  const perLink: { ratio?: number; slow?: boolean }[] = links.map(() => ({}));
  const byLink: ScanClassFindings[] = [];
  for (const c of present) {
    const idx = links.flatMap((l, i) => (classOf(l) === c ? [i] : []));
    const r = classFindings(
      c,
      agents,
      idx.map((i) => links[i]),
      opts,
    );
    idx.forEach((i, k) => (perLink[i] = r.links[k]));
    byLink.push(r.byLink);
  }
  const merged: ScanAgentFinding[] = agents.map((agent) => {
    const mine = byLink.flatMap((b) => b.agents.filter((f) => f.agent === agent).map((f) => ({ ...f, link: b.link })));
    // its figures are those of the class where it fares worst
    const worst = mine.reduce<ScanAgentFinding | undefined>((w, f) => (!w || (f.ratio !== null && (w.ratio === null || f.ratio < w.ratio)) ? f : w), undefined);
    if (!worst) return { agent, medianBandwidthGBs: null, ratio: null, medianLatencyUs: null, links: 0, slowLinks: 0, flagged: false };
    return {
      ...worst,
      links: mine.reduce((n, f) => n + f.links, 0),
      slowLinks: mine.reduce((n, f) => n + f.slowLinks, 0),
      flagged: mine.some((f) => f.flagged),
    };
  });
  const fabric = byLink.find((b) => b.link === 'inter_node')!;
  return {
    findings: {
      referenceGBs: fabric.referenceGBs,
      spreadGBs: fabric.spreadGBs,
      agents: merged,
      flaggedAgents: merged.filter((f) => f.flagged).map((f) => f.agent),
      flaggedLinks: byLink.flatMap((b) => b.flaggedLinks),
      evidence: byLink.flatMap((b) => b.evidence.map((e) => `${classText(b.link)}: ${e}`)),
      verdict: byLink.map((b) => `${classText(b.link)}: ${b.verdict}`).join('; '),
      byLink,
    },
    links: perLink,
  };
}
