// Memory of a running mesh from the outside: starts nats-server, the coordinator and N agents
// with the V8 inspector open (NODE_OPTIONS=--inspect=127.0.0.1:0, which the agents' job workers
// inherit), runs short jobs one after another, and samples each process's heap before and after
// a full GC, its RSS, and what the job stores hold in JetStream. Used by bench/coordinator/memory.ts
// and by test/robustness/memory.test.ts.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager } from '@nats-io/jetstream';
import { JobRecord, clusterNames } from '@cmesh/protocol';
import { Inspector, freePort, startNatsServer, NatsServer } from '@cmesh/testing';
import { Mesh, startMesh } from '@cmesh/testing/mesh';

export interface ProcessMemory {
  name: string;
  /** heap in use as the process left it (garbage included) */
  heapUsed: number;
  /** heap in use after a full GC: what the process really holds */
  heapAfterGc: number;
  /** heapAfterGc without compiled code: the objects a leak would add to */
  objectsAfterGc: number;
  rss: number;
}

export interface StoreState {
  /** keys (subjects) in the job records' bucket, delete markers included */
  jobRecordKeys: number;
  /** job store buckets (one stream per job) left in JetStream */
  jobStoreBuckets: number;
}

const LISTENING = /Debugger listening on (ws:\/\/\S+)/;

export class MeshMemory {
  private constructor(
    private readonly nats: NatsServer,
    readonly mesh: Mesh,
    private readonly nc: NatsConnection,
    private readonly lines: string[],
  ) {}

  static async start(agents: number, env: NodeJS.ProcessEnv = {}): Promise<MeshMemory> {
    const nats = await startNatsServer();
    const lines: string[] = [];
    try {
      const mesh = await startMesh({
        agents,
        natsUrl: nats.url,
        port: await freePort(),
        env: { ...env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:0`.trim() },
        write: (l) => (LISTENING.test(l) ? lines.push(l) : undefined),
        readyTimeoutMs: 90_000,
      });
      return new MeshMemory(nats, mesh, await connect({ servers: nats.url }), lines);
    } catch (e) {
      await nats.stop();
      throw e;
    }
  }

  /** Runs `n` small checked all-reduce jobs one after another; throws on the first that does not succeed. */
  async runJobs(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const job: JobRecord = await this.mesh.client.waitJob(
        (await this.mesh.client.submitJob({ op: 'allReduce', sizes: [8, 64, 1024], iters: 2, warmup: 0, check: true })).id,
      );
      if (job.state !== 'succeeded') throw new Error(`job ${job.id}: ${job.state}: ${job.reason}`);
    }
  }

  /**
   * The coordinator, each agent, and each agent's current job worker (the last inspector its
   * output announced). With `gc` false, heapAfterGc is NaN and the processes are left as they are.
   */
  async sample(gc = true): Promise<ProcessMemory[]> {
    const out: ProcessMemory[] = [];
    const targets: [string, string | undefined][] = [['coordinator', this.urls('coordinator')[0]]];
    for (const name of this.mesh.agentNames) {
      const urls = this.urls(name);
      targets.push([name, urls[0]], [`${name} worker`, urls.length > 1 ? urls[urls.length - 1] : undefined]);
    }
    for (const [name, url] of targets) {
      if (!url) continue;
      const insp = await Inspector.connect(url);
      try {
        const before = await insp.send<{ result: { value: { heapUsed: number; rss: number } } }>('Runtime.evaluate', {
          expression: '(() => { const m = process.memoryUsage(); return { heapUsed: m.heapUsed, rss: m.rss }; })()',
          returnByValue: true,
        });
        const after = gc ? await insp.heapAfterGc() : { heapUsed: NaN, codeUsed: NaN, rss: before.result.value.rss };
        out.push({
          name,
          heapUsed: before.result.value.heapUsed,
          heapAfterGc: after.heapUsed,
          objectsAfterGc: after.heapUsed - after.codeUsed,
          rss: after.rss,
        });
      } finally {
        insp.close();
      }
    }
    return out;
  }

  async storeState(): Promise<StoreState> {
    const jsm = await jetstreamManager(this.nc);
    const records = await jsm.streams.info(`KV_${clusterNames().buckets.jobs}`, { subjects_filter: '>' });
    let jobStoreBuckets = 0;
    for await (const name of jsm.streams.names()) if (name.startsWith('KV_') && clusterNames().stores.parse(name.slice(3))?.kind === 'jobs') jobStoreBuckets++;
    return { jobRecordKeys: Object.keys(records.state.subjects ?? {}).length, jobStoreBuckets };
  }

  async stop(): Promise<void> {
    await this.nc.close();
    await this.mesh.stop();
    await this.nats.stop();
  }

  private urls(name: string): string[] {
    return this.lines.filter((l) => l.startsWith(`[${name}]`)).map((l) => LISTENING.exec(l)![1]);
  }
}
