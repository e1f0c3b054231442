// Which agents and links of a scan are slow, with robust statistics.
//
// Each agent's score is the median bandwidth of its links. The reference is the median of the
// scores, and the spread 1.4826 x their median absolute deviation (MAD; a sigma for normal
// noise). Taking medians per agent first matters: with 4 agents, a slow one is in 3 of the 6
// links, and a median over links would be half poisoned; a healthy agent has only one slow link,
// so its score stays healthy and the reference does too.
//
// A link is slow when its bandwidth is below slowRatio x the reference and more than zMin spreads
// below it (both, so tiny noise on a very uniform fabric and large noise on a noisy one are not
// flagged); a failed link is slow. An agent is flagged when most of its links are slow (more than
// half): its NIC, host or cable. A slow link between two agents that are not flagged is flagged
// on its own: a path between those two hosts (a switch port, a route, a shaped or flapping link).
import type { ScanAgentFinding, ScanFindings, ScanLink } from '@cmesh/protocol';

export interface OutlierOptions {
  /** a link below this fraction of the reference may be slow (default 0.6) */
  slowRatio?: number;
  /** ... and only when it is more than this many robust sigmas below it (default 3) */
  zMin?: number;
}

export type LinkInput = Pick<ScanLink, 'a' | 'b' | 'state' | 'bandwidthGBs' | 'latencyUs'>;

/** The median of the numbers (the mean of the two middle ones for an even count); null when none. */
export function median(xs: readonly number[]): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The median absolute deviation from the median; null when there are no numbers. */
export function mad(xs: readonly number[]): number | null {
  const m = median(xs);
  return m === null ? null : median(xs.map((x) => Math.abs(x - m)));
}

const fmt = (x: number) => x.toFixed(2);
/** A bandwidth in GB/s as people read it: GB/s from 1 GB/s up, MB/s below. */
const rate = (gbs: number) => (gbs >= 1 ? `${gbs.toFixed(2)} GB/s` : `${(gbs * 1000).toPrecision(3)} MB/s`);

/** The findings of a scan, and each link's ratio and slowness (links returned in input order). */
export function findOutliers(
  agents: readonly string[],
  links: readonly LinkInput[],
  opts: OutlierOptions = {},
): { findings: ScanFindings; links: { ratio?: number; slow?: boolean }[] } {
  const slowRatio = opts.slowRatio ?? 0.6;
  const zMin = opts.zMin ?? 3;
  // a failed link counts as bandwidth 0; pending and skipped ones were not measured
  const bw = (l: LinkInput): number | null => (l.state === 'failed' ? 0 : l.state === 'ok' && l.bandwidthGBs !== undefined ? l.bandwidthGBs : null);
  const mine = (agent: string) => links.filter((l) => (l.a === agent || l.b === agent) && bw(l) !== null);
  const scores = new Map(agents.map((a) => [a, median(mine(a).map((l) => bw(l)!))]));
  const known = [...scores.values()].filter((s): s is number => s !== null);
  const reference = median(known);
  const spreadRaw = mad(known);
  const spread = spreadRaw === null ? null : 1.4826 * spreadRaw;

  const judge = (ref: number | null) =>
    links.map((l) => {
      const v = bw(l);
      if (v === null || ref === null || ref <= 0) return {};
      const ratio = v / ref;
      const slow = l.state === 'failed' || (ratio < slowRatio && ref - v > zMin * (spread ?? 0));
      return { ratio, slow };
    });
  const first = judge(reference);
  const slowOf = new Map(links.map((l, i) => [l, first[i].slow === true]));

  const found: ScanAgentFinding[] = agents.map((agent) => {
    const ls = mine(agent);
    const slow = ls.filter((l) => slowOf.get(l));
    const lat = ls.filter((l) => l.state === 'ok' && l.latencyUs !== undefined).map((l) => l.latencyUs!);
    const score = scores.get(agent) ?? null;
    return {
      agent,
      medianBandwidthGBs: score,
      ratio: score === null || !reference ? null : score / reference,
      medianLatencyUs: median(lat),
      links: ls.length,
      slowLinks: slow.length,
      flagged: ls.length > 0 && slow.length * 2 > ls.length,
    };
  });
  const flagged = new Set(found.filter((f) => f.flagged).map((f) => f.agent));
  // Second pass: with the flagged agents set aside, the links between the others give a clean
  // reference (with 3 agents, one slow, the first one sits halfway); ratios are read against it.
  const clean = links.filter((l) => !flagged.has(l.a) && !flagged.has(l.b) && l.state === 'ok' && l.bandwidthGBs !== undefined).map((l) => l.bandwidthGBs!);
  const ref = flagged.size && clean.length ? median(clean) : reference;
  const perLink = flagged.size && clean.length ? judge(ref).map((x, i) => ({ ratio: x.ratio, slow: first[i].slow })) : first;
  for (const f of found) f.ratio = f.medianBandwidthGBs === null || !ref ? null : f.medianBandwidthGBs / ref;
  const evidence: string[] = [];
  for (const f of found.filter((x) => x.flagged)) {
    const ls = mine(f.agent).filter((l) => slowOf.get(l));
    const failed = ls.filter((l) => l.state === 'failed').length;
    const r = median(ls.map((l) => bw(l)! / ref!))!;
    evidence.push(`${f.agent}: ${fmt(r)}x median bandwidth on ${f.slowLinks} of ${f.links} links${failed ? ` (${failed} failed)` : ''}`);
  }
  const flaggedLinks: ScanFindings['flaggedLinks'] = [];
  links.forEach((l, i) => {
    if (!perLink[i].slow || flagged.has(l.a) || flagged.has(l.b)) return;
    flaggedLinks.push({ a: l.a, b: l.b, ratio: perLink[i].ratio! });
    evidence.push(`link ${l.a}<->${l.b}: ${fmt(perLink[i].ratio!)}x${l.state === 'failed' ? ' (failed)' : ''}`);
  });

  const measured = links.filter((l) => bw(l) !== null).length;
  let verdict: string;
  if (reference === null || reference <= 0) verdict = `inconclusive: no link of ${agents.length} agents was measured`;
  else if (!flagged.size && !flaggedLinks.length)
    verdict = `healthy: ${agents.length} agents, ${measured} links, none below ${slowRatio}x of the reference ${rate(reference)}`;
  else {
    const parts: string[] = [];
    if (flagged.size) parts.push(`${flagged.size} agent${flagged.size > 1 ? 's' : ''} flagged (${[...flagged].join(', ')})`);
    if (flaggedLinks.length)
      parts.push(`${flaggedLinks.length} link${flaggedLinks.length > 1 ? 's' : ''} flagged (${flaggedLinks.map((l) => `${l.a}<->${l.b}`).join(', ')})`);
    verdict = `${parts.join(', ')}; reference ${rate(ref!)} over ${measured} links`;
  }
  if (measured < links.length && reference !== null && reference > 0) verdict += `; ${links.length - measured} of ${links.length} links not measured`;
  return {
    findings: { referenceGBs: ref, spreadGBs: spread, agents: found, flaggedAgents: [...flagged], flaggedLinks, evidence, verdict },
    links: perLink,
  };
}
