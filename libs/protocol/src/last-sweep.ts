// "Last sweep" gauges (busbw, algbw by op, backend, dtype and size class) must forget the sizes of an
// older sweep of the same op, backend and dtype when a new one reports, or panels mix sweeps and
// an alert on a stale low value never resolves. This tracks which label sets each sweep set.

// a type, not an interface: prom-client takes it as a label record
export type SweepLabels = {
  op: string;
  backend: string;
  dtype: string;
  size_class: string;
};

export class LastSweepSeries {
  private readonly bySweep = new Map<string, { job: string; sizes: Map<string, SweepLabels> }>();

  /** Records that `job` set `labels`; returns the label sets an older sweep left, to remove. */
  record(job: string, labels: SweepLabels): SweepLabels[] {
    const key = `${labels.op}|${labels.backend}|${labels.dtype}`;
    const cur = this.bySweep.get(key);
    let stale: SweepLabels[] = [];
    if (!cur || cur.job !== job) {
      stale = cur ? [...cur.sizes.values()].filter((l) => l.size_class !== labels.size_class) : [];
      this.bySweep.set(key, { job, sizes: new Map([[labels.size_class, labels]]) });
    } else cur.sizes.set(labels.size_class, labels);
    return stale;
  }
}
