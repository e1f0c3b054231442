// The agents of one GPU node (the rank agent's node mode, `--devices`): one per device, named
// `<node>-gpu<i>`. The name is the agent's id, its NATS user and a token of NATS subjects, so it
// holds [A-Za-z0-9_-] only and at most 64 characters; a Kubernetes node name may hold dots and
// run to 253 characters, so both the agent and `cmesh secrets k8s --gpu-nodes` derive it here.
import { createHash } from 'crypto';

const MAX_NAME = 64;

/** The agent name of device `device` on node `node`: `<node>-gpu<device>`, the node's other characters as `_`. */
export function nodeAgentName(node: string, device: number): string {
  if (!node) throw new RangeError('node agent name: the node name is empty');
  if (!Number.isInteger(device) || device < 0 || device > 1 << 16) throw new RangeError(`node agent name: device ${device} is not an index`);
  const suffix = `-gpu${device}`;
  let prefix = node.replace(/[^A-Za-z0-9_-]/g, '_');
  // two long node names that share their first characters keep distinct names: a hash of the whole name
  if (prefix.length + suffix.length > MAX_NAME)
    prefix = `${prefix.slice(0, MAX_NAME - suffix.length - 9)}-${createHash('sha256').update(node).digest('hex').slice(0, 8)}`;
  return prefix + suffix;
}

/** Every agent of `nodes`, `devices` each, in node order then device order. */
export function nodeAgentNames(nodes: readonly string[], devices: number): string[] {
  return nodes.flatMap((n) => Array.from({ length: devices }, (_, i) => nodeAgentName(n, i)));
}
