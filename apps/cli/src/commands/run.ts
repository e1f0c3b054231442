// `cmesh run [torchrun flags] script [args...]`. Like torchrun, every flag can come from a PET_*
// variable (PET_ + the flag's name upper-cased, dashes as underscores: PET_NPROC_PER_NODE), as
// Kubeflow's PyTorchJob sets them; a flag on the command line wins.
import { Command, InvalidArgumentError as CommanderInvalidArgument, Option } from 'commander';
import * as fs from 'fs';
import { randomBytes } from 'crypto';
import * as os from 'os';
import { freePort, generateSecret, InvalidArgumentError, resolveSecret } from '@cmesh/collectives';
import { launch } from '../run/launcher';
import { metricsPortFrom, parseBindTo, quotaNote } from '../run/binding';
import { cpuBudget } from '../run/cpu-quota';
import { checkScript } from '../run/script';
import { UsageError } from '../usage';
import type { RunOptions } from '../run/rdzv';
import { parseLocalRanksFilter, parseStd } from '../run/worker-logs';

function positiveInt(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
    return n;
  };
}

/** torchrun's --nproc-per-node: a count, or cpu / gpu / auto (GPUs if any, else CPUs). */
/**
 * The run's shared secret (the workers' CMESH_SECRET): the one the launcher was given in
 * CMESH_SECRET (every node of a job must have the same), else a fresh one for a single-node run.
 * A multi-node run without one: the nats rendezvous shares one through its bucket (rdzv-nats.ts);
 * static and c10d run unauthenticated, since no launcher could tell the others its own.
 */
export function runSecret(maxNodes: number, env: NodeJS.ProcessEnv): string | undefined {
  if (env.CMESH_SECRET) {
    resolveSecret(undefined, env); // a short one is refused here, before any worker starts
    return env.CMESH_SECRET;
  }
  return maxNodes === 1 ? generateSecret() : undefined;
}

/**
 * --rdzv-id: torch's default `none` is one bucket and one secret for every nats run that keeps it,
 * so a nats rendezvous on one node gets a fresh id, and one on more nodes must be given one.
 */
export function rdzvIdFor(backend: string, given: string | undefined, maxNodes: number): string {
  if (given !== undefined) {
    if (!given.trim()) throw new InvalidArgumentError('--rdzv-id must not be empty');
    return given;
  }
  if (backend !== 'nats') return 'none';
  if (maxNodes === 1) return `run-${randomBytes(8).toString('hex')}`;
  throw new InvalidArgumentError(
    `--rdzv-backend nats on up to ${maxNodes} nodes needs --rdzv-id: the same id on every node of the run, a new one for every run`,
  );
}

export function parseNprocPerNode(v: string): number {
  const cpus = () => os.availableParallelism?.() ?? os.cpus().length;
  const gpus = () => {
    try {
      return fs.readdirSync('/dev').filter((d) => /^nvidia\d+$/.test(d)).length;
    } catch {
      return 0;
    }
  };
  if (v === 'cpu') return cpus();
  if (v === 'auto') return gpus() || cpus();
  if (v === 'gpu') {
    const n = gpus();
    if (!n) throw new InvalidArgumentError('--nproc-per-node gpu: no GPU found on this node');
    return n;
  }
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1) throw new InvalidArgumentError(`--nproc-per-node must be a positive integer, cpu, gpu or auto, got ${JSON.stringify(v)}`);
  return n;
}

export interface RdzvConf {
  joinTimeoutMs?: number;
  lastCallMs?: number;
  closeTimeoutMs?: number;
  readTimeoutMs?: number;
  keepAliveIntervalMs?: number;
  keepAliveMaxAttempt?: number;
  isHost?: boolean;
}

const RDZV_CONF_KEYS = 'join_timeout, last_call_timeout, close_timeout, read_timeout, keep_alive_interval (seconds), keep_alive_max_attempt, is_host';

/** torchrun's --rdzv-conf key=value,...: times in seconds like torch. */
export function parseRdzvConf(v: string | undefined): RdzvConf {
  const out: RdzvConf = {};
  if (!v) return out;
  for (const pair of v.split(',').filter(Boolean)) {
    const [key, value, ...extra] = pair.split('=');
    const bad = (what: string) => new InvalidArgumentError(`--rdzv-conf ${JSON.stringify(pair)}: expected ${what}`);
    if (value === undefined || extra.length) throw bad('key=value');
    if (key === 'is_host') {
      const b = value.toLowerCase();
      if (!['true', 'false', '1', '0', 'yes', 'no'].includes(b)) throw bad('is_host=true or false');
      out.isHost = b === 'true' || b === '1' || b === 'yes';
      continue;
    }
    const n = value.trim() === '' ? NaN : Number(value);
    const seconds = () => {
      if (!(n >= 0) || !Number.isFinite(n)) throw bad(`${key}=<non-negative number of seconds>`);
      return n * 1000;
    };
    if (key === 'join_timeout' || key === 'timeout') out.joinTimeoutMs = seconds();
    else if (key === 'last_call_timeout') out.lastCallMs = seconds();
    else if (key === 'close_timeout') out.closeTimeoutMs = seconds();
    else if (key === 'read_timeout') out.readTimeoutMs = seconds();
    else if (key === 'keep_alive_interval') out.keepAliveIntervalMs = seconds();
    else if (key === 'keep_alive_max_attempt') {
      if (!Number.isInteger(n) || n < 1) throw bad('keep_alive_max_attempt=<integer >= 1>');
      out.keepAliveMaxAttempt = n;
    } else throw new InvalidArgumentError(`--rdzv-conf: unknown or invalid key ${JSON.stringify(pair)} (${RDZV_CONF_KEYS})`);
  }
  return out;
}

/** --monitor-interval: seconds (a fraction allowed), like torchrun. */
export function parseSeconds(flag: string) {
  return (v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !(n > 0) || !Number.isFinite(n))
      throw new InvalidArgumentError(`${flag} must be a positive number of seconds, got ${JSON.stringify(v)}`);
    return n;
  };
}

export function parseNnodes(v: string): { min: number; max: number } {
  const m = /^(\d+)(?::(\d+))?$/.exec(v);
  if (!m) throw new InvalidArgumentError(`--nnodes must be N or MIN:MAX, got ${JSON.stringify(v)}`);
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : Number(m[2]);
  if (min < 1 || max < min) throw new InvalidArgumentError(`--nnodes ${v}: need 1 <= MIN <= MAX`);
  return { min, max };
}

/** torchrun accepts --nproc_per_node and --nproc-per-node alike: normalise the launcher's own flags. */
export function normaliseFlags(argv: string[]): string[] {
  const out = [...argv];
  const runAt = out.indexOf('run');
  if (runAt < 0) return out;
  const isFlag = (a: string) => a.startsWith('-') && a.length > 1;
  for (let i = runAt + 1; i < out.length; i++) {
    const a = out[i];
    if (!isFlag(a)) {
      const prev = out[i - 1];
      if (i > runAt + 1 && isFlag(prev) && !prev.includes('=') && !BOOLEAN_FLAGS.has(prev)) continue; // a flag's value
      break; // the script: everything after belongs to it
    }
    if (a === '--') break;
    if (!a.startsWith('--')) continue; // a short flag (-r, -t)
    const [flag, ...rest] = a.split('=');
    out[i] = [flag.replace(/_/g, '-'), ...rest].join('=');
  }
  return out;
}

const BOOLEAN_FLAGS = new Set(['--standalone']);

/** torchrun's variable for a flag: PET_ + its long name upper-cased, dashes as underscores. */
export function petName(option: Option): string {
  return 'PET_' + (option.long ?? '').replace(/^--/, '').replace(/-/g, '_').toUpperCase();
}

/**
 * Every valued flag added to `cmd` from now on reads its PET_* variable (commander: the command
 * line wins, then the variable, then the default). Commander wires a variable up as the option is
 * added, hence before the options are declared.
 */
export function readPetEnv(cmd: Command): Command {
  const add = cmd.addOption.bind(cmd);
  cmd.addOption = (option: Option) => {
    if (!option.long || !(option.required || option.optional)) return add(option);
    const parse = option.parseArg;
    // commander names the source (the flag, or the variable) of a value its own error type rejects
    if (parse) {
      option.argParser((value: string, previous: unknown) => {
        try {
          return parse(value, previous);
        } catch (e) {
          throw e instanceof CommanderInvalidArgument ? e : new CommanderInvalidArgument((e as Error).message);
        }
      });
    }
    return add(option.env(petName(option)));
  };
  return cmd;
}

/** A torchrun on/off flag from its variable (torch's check_env: an integer, non-zero is on). */
export function petFlag(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return false;
  if (!/^-?\d+$/.test(raw.trim())) throw new UsageError(`${name} must be an integer (0: off, else on), got ${JSON.stringify(raw)}`);
  return Number(raw) !== 0;
}

export function register(program: Command): void {
  readPetEnv(program.command('run'))
    .description('launch a distributed script like torchrun: RANK, LOCAL_RANK, WORLD_SIZE, … for every worker')
    .addOption(new Option('--nproc-per-node <n>', 'workers on this node: a count, cpu, gpu or auto').default(1).argParser(parseNprocPerNode))
    .addOption(new Option('--nnodes <n>', 'N or MIN:MAX nodes').default('1').argParser((v) => (parseNnodes(v), v)))
    .addOption(
      new Option('--node-rank <k>', "this node's rank (static; with c10d or nats a requested rank, others fill in join order)").argParser(
        positiveInt('--node-rank'),
      ),
    )
    .option('--master-addr <addr>', 'address of rank 0 (static rendezvous)', '127.0.0.1')
    .addOption(new Option('--master-port <port>', "port of rank 0's store; 0 picks a free one").default(29500).argParser(positiveInt('--master-port')))
    .option('--standalone', 'single node with a free port, no external rendezvous (env: PET_STANDALONE=1)', false)
    .option('--rdzv-backend <name>', 'static | c10d | nats')
    .option('--rdzv-endpoint <host:port>', 'rendezvous endpoint')
    .option('--rdzv-id <id>', 'job id shared by all nodes (default: none; nats: a fresh one on a single node, required on more)')
    .addOption(new Option('--rdzv-last-call <ms>', 'last-call window of a MIN:MAX rendezvous').default(1000).argParser(positiveInt('--rdzv-last-call')))
    .addOption(new Option('--rdzv-timeout <ms>', 'rendezvous timeout').default(600000).argParser(positiveInt('--rdzv-timeout')))
    .addOption(new Option('--rdzv-conf <k=v,...>', RDZV_CONF_KEYS).argParser((v) => (parseRdzvConf(v), v)))
    .addOption(
      new Option('--max-restarts <n>', 'restarts of the worker group after a failure (on every node, counted for the whole job) before the job fails')
        .default(0)
        .argParser(positiveInt('--max-restarts')),
    )
    .addOption(
      new Option('--monitor-interval <seconds>', 'how often the launcher looks at its workers and the rendezvous')
        .default(0.1)
        .argParser(parseSeconds('--monitor-interval')),
    )
    .option('--role <name>', "the workers' ROLE_NAME", 'default')
    .option('--log-dir <dir>', "base directory of the workers' log files (<dir>/<rdzv id>_<random>/attempt_<n>/<local rank>/)")
    .addOption(
      new Option(
        '-r, --redirects <std>',
        "send workers' stdout (1), stderr (2) or both (3) to their log files instead of the console; per local rank: 0:1,1:2",
      ).argParser((v) => parseStd('--redirects', v)),
    )
    .addOption(
      new Option('-t, --tee <std>', "copy workers' stdout (1), stderr (2) or both (3) to their log files as well; per local rank: 0:1,1:2").argParser((v) =>
        parseStd('--tee', v),
      ),
    )
    .addOption(
      new Option('--local-ranks-filter <ranks>', "show only these local ranks' output on the console, e.g. 0,2 (log files are unaffected)").argParser(
        parseLocalRanksFilter,
      ),
    )
    .addOption(
      new Option(
        '--bind-to <what>',
        "core: bind each worker's main thread to a core of its own (LOCAL_RANK over the allowed cores); none: never. Default: CMESH_BIND, else core when the node's workers busy-poll",
      ).argParser(parseBindTo),
    )
    .addOption(
      new Option(
        '--metrics-port <port>',
        'each worker serves its collectives on /metrics at port + LOCAL_RANK (0: free ports). Default: CMESH_METRICS_PORT',
      ).argParser(positiveInt('--metrics-port')),
    )
    .option('--metrics-host <addr>', "address the workers' exporters listen on. Default: CMESH_METRICS_HOST, else 127.0.0.1")
    .argument('<script>', 'a .ts or .js script (or an executable)')
    .argument('[args...]', 'arguments for the script')
    .passThroughOptions()
    .action(async (script: string, args: string[], flags, command: Command) => {
      // before any rendezvous or worker: a missing script would fail on every rank, every restart
      checkScript(script);
      if (command.getOptionValueSource('standalone') !== 'cli') flags.standalone = petFlag('PET_STANDALONE');
      const nnodes = parseNnodes(String(flags.nnodes));
      const conf = parseRdzvConf(flags.rdzvConf);
      const o: RunOptions = {
        nprocPerNode: flags.nprocPerNode,
        nnodes,
        nodeRank: flags.nodeRank,
        masterAddr: flags.masterAddr,
        masterPort: flags.masterPort,
        rdzvBackend: flags.rdzvBackend ?? (flags.rdzvEndpoint ? 'c10d' : 'static'),
        rdzvEndpoint: flags.rdzvEndpoint,
        rdzvId: rdzvIdFor(flags.rdzvBackend ?? (flags.rdzvEndpoint ? 'c10d' : 'static'), flags.rdzvId, nnodes.max),
        lastCallMs: conf.lastCallMs ?? flags.rdzvLastCall,
        timeoutMs: conf.joinTimeoutMs ?? flags.rdzvTimeout,
        keepAliveIntervalMs: conf.keepAliveIntervalMs ?? 5000,
        keepAliveMaxAttempt: conf.keepAliveMaxAttempt ?? 3,
        closeTimeoutMs: conf.closeTimeoutMs,
        readTimeoutMs: conf.readTimeoutMs,
        isHost: conf.isHost,
        maxRestarts: flags.maxRestarts,
        monitorIntervalMs: flags.monitorInterval * 1000,
        role: flags.role,
        logs: { logDir: flags.logDir, redirects: flags.redirects, tee: flags.tee, localRanksFilter: flags.localRanksFilter },
        placement: {
          bindTo: flags.bindTo,
          metricsPort: metricsPortFrom(flags.metricsPort, process.env),
          metricsHost: flags.metricsHost ?? (process.env.CMESH_METRICS_HOST || undefined),
        },
      };
      if (flags.standalone) {
        // torchrun --standalone: one node, a free port, no external rendezvous
        if (nnodes.max !== 1) throw new InvalidArgumentError(`--standalone runs a single node, but --nnodes is ${flags.nnodes}`);
        o.rdzvBackend = 'static';
        o.masterPort = await freePort(o.masterAddr);
      } else if (o.rdzvBackend === 'static' && o.masterPort === 0) {
        if (nnodes.max > 1)
          throw new InvalidArgumentError('--master-port 0 (pick a free port) works for a single node only: other nodes could not know the port');
        o.masterPort = await freePort(o.masterAddr);
      }
      o.secret = runSecret(nnodes.max, process.env);
      const note = quotaNote(o.nprocPerNode, cpuBudget(), process.env, flags.bindTo);
      if (note) process.stderr.write(`cmesh run: ${note}\n`);
      const result = await launch(o, script, args);
      if (result.message) console.error(result.message);
      process.exit(result.exitCode);
    });
}
