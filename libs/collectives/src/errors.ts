// Typed errors: every failure says what, where and who (op, group, sequence number, this rank, peers).
import type { GroupReport } from './trace/analysis';

export interface ErrorContext {
  op?: string;
  group?: string;
  seq?: number;
  rank?: number;
  peers?: number[];
}

export class CmeshError extends Error {
  readonly code: string = 'CMESH_ERROR';
  constructor(
    message: string,
    readonly context: ErrorContext = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Bad input from the caller: wrong sizes, ranks out of range, unsupported op for a dtype. Nothing was changed. */
export class InvalidArgumentError extends CmeshError {
  override readonly code = 'INVALID_ARGUMENT';
}

/** The default process group is used before initProcessGroup or after destroyProcessGroup. */
export class NotInitializedError extends CmeshError {
  override readonly code = 'NOT_INITIALIZED';
}

/** A blocking call did not finish within its timeout. */
export class DistTimeoutError extends CmeshError {
  override readonly code = 'TIMEOUT';
  /**
   * A collective's timeout: what every member of the group was doing (the flight recorder's
   * report, from the members that answered through the store); its lines end the message.
   */
  desync?: GroupReport;
}

/** A peer died or closed its connection while work that needs it was pending. */
export class PeerFailureError extends CmeshError {
  override readonly code = 'PEER_FAILURE';
}

/** Ranks disagree on a call: different collectives (op, dtype, count, root), or a send whose size is not the matching recv's. */
export class CollectiveMismatchError extends CmeshError {
  override readonly code = 'COLLECTIVE_MISMATCH';
}

/** The transport asked for (CMESH_TRANSPORT=shm) cannot connect these ranks; the message says why. */
export class TransportUnavailableError extends CmeshError {
  override readonly code = 'TRANSPORT_UNAVAILABLE';
}

/**
 * The process group's backend cannot run this call (an op, dtype, reduce op or argument form it
 * does not have, e.g. a bitwise reduce op on nccl). Checked before anything moves: nothing changed.
 */
export class BackendUnsupportedError extends CmeshError {
  override readonly code = 'BACKEND_UNSUPPORTED';
  constructor(
    message: string,
    /** The backend that refused ('tcp', 'nccl'). */
    readonly backend: string,
    context: ErrorContext = {},
  ) {
    super(message, context);
  }
}

/** Store (rendezvous key-value) failures other than timeouts. */
export class StoreError extends CmeshError {
  override readonly code: string = 'STORE_ERROR';
}

/**
 * The store server refused a request (or the connection) because one of its limits is reached:
 * frame size, keys, bytes held, connections, parked waits. Nothing was changed; the message names
 * the limit.
 */
export class StoreLimitError extends StoreError {
  override readonly code = 'STORE_LIMIT';
}

/** A launched child process failed (spawn / cmesh run). */
export class ProcessExitedError extends CmeshError {
  override readonly code = 'PROCESS_EXITED';
  constructor(
    message: string,
    readonly failedRank: number,
    readonly exitCode: number | null,
    readonly signal: string | null = null,
  ) {
    super(message, { rank: failedRank });
  }
}

/** Formats "op=allReduce group=0 seq=3 rank=1 peers=[2]" for error messages. */
export function describeContext(ctx: ErrorContext): string {
  const parts: string[] = [];
  if (ctx.op !== undefined) parts.push(`op=${ctx.op}`);
  if (ctx.group !== undefined) parts.push(`group=${ctx.group}`);
  if (ctx.seq !== undefined) parts.push(`seq=${ctx.seq}`);
  if (ctx.rank !== undefined) parts.push(`rank=${ctx.rank}`);
  if (ctx.peers !== undefined && ctx.peers.length) parts.push(`peers=[${ctx.peers.join(',')}]`);
  return parts.join(' ');
}

/**
 * A connection was refused because the two ends do not share the run's secret (one has none, or
 * they differ). Nothing was read or written on it. The message never contains a secret.
 */
export class AuthenticationError extends CmeshError {
  override readonly code = 'AUTHENTICATION_FAILED';
}

/**
 * A NATS connection was down when an operation's deadline passed (or a service group's outage
 * bound): names the servers it knew and how long it had been disconnected. The client kept
 * reconnecting meanwhile; the operation may have run or not (check before running it again).
 */
export class NatsConnectionLostError extends CmeshError {
  override readonly code = 'NATS_CONNECTION_LOST';
  constructor(
    message: string,
    /** the servers the connection knew (configured and learned from the cluster) */
    readonly servers: string[],
    /** how long it had been disconnected when this was raised, ms */
    readonly disconnectedMs: number,
    context: ErrorContext = {},
  ) {
    super(message, context);
  }
}
