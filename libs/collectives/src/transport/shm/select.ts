// Which transport the data plane uses between two ranks: CMESH_TRANSPORT or initProcessGroup's
// `transport` option. tcp: always TCP. shm: shared memory between every pair, an error where that
// is impossible (ranks on different hosts, no segment). auto: shared memory between ranks of one
// host, TCP otherwise and wherever a segment cannot be made.
import { InvalidArgumentError } from '../../errors';

const TRANSPORTS = ['auto', 'tcp', 'shm'] as const;
export type TransportMode = (typeof TRANSPORTS)[number];
const DEFAULT_TRANSPORT: TransportMode = 'auto';

export function transportMode(option?: string, env: Record<string, string | undefined> = process.env): TransportMode {
  const raw = option ?? env.CMESH_TRANSPORT;
  if (raw === undefined || raw.trim() === '') return DEFAULT_TRANSPORT;
  const v = raw.trim().toLowerCase();
  if (!(TRANSPORTS as readonly string[]).includes(v)) {
    const source = option !== undefined ? 'initProcessGroup: transport' : 'CMESH_TRANSPORT';
    throw new InvalidArgumentError(`${source} must be one of ${TRANSPORTS.join(', ')}, got ${JSON.stringify(raw)}`);
  }
  return v as TransportMode;
}

export { hostIdentity } from '../../host-identity';
