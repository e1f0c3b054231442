// `cmesh-rank-agent --devices all|N` (or CMESH_DEVICES): the node mode. One process supervises
// one agent per device of the node (a Kubernetes pod that owns the node's GPUs, or a bare-metal
// host), so the node's ranks are processes of one host and NCCL uses NVLink/P2P and shared
// memory between them. The settings are checked as device 0's agent would read them before any
// agent starts, so a bad one fails the supervisor at once instead of every agent in a loop.
import { loadConfig } from '../config';
import { nodePlan } from './node-plan';
import { NodeSupervisor } from './node-supervisor';

export async function runNodeMode(devices: string, argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const plan = nodePlan(devices, argv, env);
  loadConfig(plan.argv, { ...env, ...plan.agents[0].env });
  const sup = new NodeSupervisor(plan, { command: process.execPath, args: [...process.execArgv, process.argv[1]] });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void sup.stop(signal));
  sup.start();
  return sup.done;
}
