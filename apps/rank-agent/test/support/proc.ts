// Finding a test's descendant processes wherever they were reparented: each carries a marker
// in its environment (CMESH_TEST_MARK), and /proc shows who still has it.
import { readdirSync, readFileSync } from 'fs';

export function markedPids(marker: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${d}/environ`, 'latin1').includes(`CMESH_TEST_MARK=${marker}`)) out.push(Number(d));
    } catch {
      /* gone or not ours */
    }
  }
  return out;
}
