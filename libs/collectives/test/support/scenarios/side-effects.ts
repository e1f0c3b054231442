// What initProcessGroup does to its process: the main thread's CPUs and whether anything serves
// metrics on `probePort`, after a small allReduce (so that the data plane has spun if it would).
// With `dieRank`, that rank exits without a goodbye and the others see their next allReduce fail.
import * as fs from 'fs';
import * as net from 'net';
import * as dist from '../../../src';

const cpus = (task: string | number) => /^Cpus_allowed_list:\s*(.*)$/m.exec(fs.readFileSync(`/proc/self/task/${task}/status`, 'utf8'))?.[1].trim();

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

export async function run(args: { bindToCore?: boolean | number; probePort?: number; dieRank?: number } | null): Promise<Record<string, unknown>> {
  const before = cpus(process.pid);
  await dist.initProcessGroup({ timeout: 20000, ...(args?.bindToCore === undefined ? {} : { bindToCore: args.bindToCore }) });
  const t = new Float32Array([dist.getRank() + 1]);
  for (let i = 0; i < 20; i++) await dist.allReduce(t);
  if (args?.dieRank === dist.getRank()) process.exit(0);
  if (args?.dieRank !== undefined) {
    const failed = await dist.allReduce(t).then(
      () => 'no error',
      (e: Error) => e.name,
    );
    return { failed };
  }
  const main = cpus(process.pid);
  const others = fs
    .readdirSync('/proc/self/task')
    .filter((x) => x !== String(process.pid))
    .map(cpus);
  const serving = args?.probePort === undefined ? undefined : await listening(args.probePort + Number(process.env.LOCAL_RANK ?? 0));
  await dist.destroyProcessGroup();
  return { before, main, others, serving };
}
