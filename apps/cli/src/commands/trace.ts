// `cmesh trace merge DIR`: the flight recorder dumps of a job (cmesh_trace_rank_<r>.json, written
// on a timeout or failure with CMESH_TRACE_DUMP_DIR, or by dist.dumpTrace()) merged into one
// analysis per process group: which ranks wait in which collective since when, and what every
// other rank last finished and is doing now; the same analysis `cmesh status --stuck` prints live.
import { Command } from 'commander';
import { analyzeTraces, formatReports, readDumps } from '@cmesh/collectives';
import * as fs from 'fs';
import { UsageError } from '../usage';

export function mergeTraces(dir: string): { text: string; reports: ReturnType<typeof analyzeTraces> } {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new UsageError(`trace merge: ${dir} is not a directory`);
  const dumps = readDumps(dir);
  if (!dumps.length) throw new Error(`trace merge: no flight recorder dumps (cmesh_trace_rank_<rank>.json) in ${dir}`);
  const reports = analyzeTraces(dumps);
  const ranks = dumps.map((d) => d.rank).sort((a, b) => a - b);
  return { reports, text: `${dumps.length} dumps (ranks ${ranks.join(',')}) in ${dir}\n${formatReports(reports)}\n` };
}

export function register(program: Command): void {
  const trace = program.command('trace').description('flight recorder dumps: which rank is stuck, and where');
  trace
    .command('merge <dir>')
    .description('analyse the dump files of every rank in DIR (cmesh_trace_rank_<rank>.json)')
    .option('--json', 'print the reports as JSON')
    .action((dir: string, o: { json?: boolean }) => {
      const { text, reports } = mergeTraces(dir);
      process.stdout.write(o.json ? JSON.stringify({ reports }, null, 2) + '\n' : text);
    });
}
