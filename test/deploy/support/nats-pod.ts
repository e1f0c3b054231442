// The NATS pod of k8s/base on this machine: its nats.conf (the ConfigMap) with only what ties it to
// the pod rewritten (the store, the pid file, the cluster port, and in routes.conf the pods'
// names), and the files of the Secret cmesh-nats-auth beside it, as the projected volume puts them.
import { writeFileSync } from 'fs';
import { join } from 'path';

export interface LocalNatsPod {
  /** the ConfigMap's nats.conf */
  natsConf: string;
  /** the Secret's files (auth.conf, routes.conf) */
  secretFiles: Record<string, string>;
  dir: string;
  clusterPort: number;
  /** pod host name (nats-<i>.nats-headless) -> 127.0.0.1:<its cluster port> */
  routeTo?: Map<string, number>;
}

/** Writes nats.conf and the Secret's files into `dir`; returns the path of nats.conf. */
export function writeLocalNatsPod(p: LocalNatsPod): string {
  const conf = p.natsConf
    .replace(/^ {2}store_dir: \/data$/m, `  store_dir: ${JSON.stringify(join(p.dir, 'data'))}`)
    .replace(/^pid_file: .*$/m, `pid_file: ${JSON.stringify(join(p.dir, 'nats.pid'))}`)
    .replace(/^ {2}port: 6222$/m, `  port: ${p.clusterPort}`);
  for (const must of ['store_dir', 'pid_file', `port: ${p.clusterPort}`])
    if (!conf.includes(must)) throw new Error(`nats.conf of the ConfigMap: no ${must} to rewrite`);
  writeFileSync(join(p.dir, 'nats.conf'), conf);
  for (const [name, text] of Object.entries(p.secretFiles)) {
    let out = text;
    for (const [host, port] of p.routeTo ?? []) out = out.split(`@${host}:6222`).join(`@127.0.0.1:${port}`);
    writeFileSync(join(p.dir, name), out, { mode: 0o600 });
  }
  return join(p.dir, 'nats.conf');
}
