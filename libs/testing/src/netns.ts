// "Hosts" on one machine for multi-host tests and benchmarks: a Linux network namespace per host,
// each with one interface (cm0, 10.77.0.<i+1>/24) on a bridge that lives in a namespace of its
// own, so that no traffic touches the machine's own network. Each host's uplink can be shaped:
// tbf for the rate and, where the kernel has sch_netem, netem for a one-way delay. Needs root
// (CAP_NET_ADMIN and CAP_SYS_ADMIN). Programs run in a host with `ip netns exec <name> ...`.
import { execFileSync } from 'child_process';

export interface NetnsHostsOptions {
  hosts: number;
  /** rate of every host's uplink (tbf), e.g. '1gbit'; default unshaped */
  rate?: string;
  /** one-way delay added to every host's uplink (netem), microseconds; left out where the kernel has no netem */
  delayUs?: number;
  /** namespace names start with this, then the pid (default 'cmesh') */
  prefix?: string;
}

export interface NetnsHosts {
  /** each host's namespace */
  names: string[];
  /** each host's address on the shared link */
  addrs: string[];
  /** the interface name in every host */
  ifname: string;
  /** what shapes the link, in words (rate, delay, or why there is no delay) */
  shaping: string;
  /** the command prefix that runs a program in host i */
  exec(host: number): string[];
  /** Deletes every namespace made (idempotent); their interfaces go with them. */
  remove(): void;
}

const IFNAME = 'cm0';
let made = 0;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function tc(ns: string, ...args: string[]): void {
  execFileSync('tc', ['-n', ns, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
}

function message(e: unknown): string {
  const err = e as { stderr?: Buffer; message?: string };
  return (err.stderr?.toString().trim() || err.message || String(e)).split('\n')[0];
}

/** Why namespaces cannot be made here (not Linux, no `ip`, not permitted), or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`;
  const probe = `cmesh-probe-${process.pid}-${made++}`;
  try {
    ip('netns', 'add', probe);
  } catch (e) {
    return `ip netns add is not permitted here: ${message(e)}`;
  }
  try {
    ip('netns', 'del', probe);
  } catch {
    // made but not removable would leak: say so rather than go on
    return `ip netns del ${probe} failed`;
  }
  return undefined;
}

/** Makes the hosts; on any failure removes what it made and throws, naming the step. */
export function createNetnsHosts(o: NetnsHostsOptions): NetnsHosts {
  const base = `${o.prefix ?? 'cmesh'}-${process.pid}-${made++}`;
  const sw = `${base}-sw`;
  const names = Array.from({ length: o.hosts }, (_, i) => `${base}-h${i}`);
  const addrs = names.map((_, i) => `10.77.0.${i + 1}`);
  const created: string[] = [];
  const remove = () => {
    for (const ns of created.splice(0).reverse()) {
      try {
        ip('netns', 'del', ns);
      } catch {
        // already gone
      }
    }
  };
  let shaping = 'unshaped';
  let step = '';
  try {
    for (const ns of [sw, ...names]) {
      step = `ip netns add ${ns}`;
      ip('netns', 'add', ns);
      created.push(ns);
    }
    step = 'bridge';
    ip('-n', sw, 'link', 'add', 'br0', 'type', 'bridge', 'forward_delay', '0', 'stp_state', '0');
    ip('-n', sw, 'link', 'set', 'br0', 'up');
    let netem = o.delayUs !== undefined;
    names.forEach((ns, i) => {
      step = `veth to ${ns}`;
      ip('-n', sw, 'link', 'add', `p${i}`, 'type', 'veth', 'peer', 'name', IFNAME, 'netns', ns);
      ip('-n', sw, 'link', 'set', `p${i}`, 'master', 'br0', 'up');
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'addr', 'add', `${addrs[i]}/24`, 'dev', IFNAME);
      ip('-n', ns, 'link', 'set', IFNAME, 'up');
      step = `shaping ${ns}`;
      let parent = ['root'];
      if (netem) {
        try {
          tc(ns, 'qdisc', 'add', 'dev', IFNAME, 'root', 'handle', '1:', 'netem', 'delay', `${o.delayUs}us`, 'limit', '100000');
          parent = ['parent', '1:1'];
        } catch (e) {
          netem = false;
          shaping = `no delay (netem: ${message(e)})`;
        }
      }
      // burst: a few 64 KiB GSO segments; latency bounds the queue (TCP fills it)
      if (o.rate) tc(ns, 'qdisc', 'add', 'dev', IFNAME, ...parent, 'handle', '10:', 'tbf', 'rate', o.rate, 'burst', '256kb', 'latency', '20ms');
    });
    const parts = [
      o.rate ? `tbf ${o.rate} per host uplink` : '',
      netem ? `netem delay ${o.delayUs} us one way` : '',
      o.delayUs !== undefined && !netem ? shaping : '',
    ];
    shaping = parts.filter(Boolean).join(', ') || 'unshaped';
  } catch (e) {
    remove();
    throw new Error(`netns hosts: ${step} failed: ${message(e)}`);
  }
  return { names, addrs, ifname: IFNAME, shaping, exec: (h) => ['ip', 'netns', 'exec', names[h]], remove };
}
