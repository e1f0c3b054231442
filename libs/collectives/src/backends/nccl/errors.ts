// Typed errors of the nccl backend. The sidecar's error code (README "Errors") is kept as
// `sidecarCode`; the class says what kind of failure it is.
import { CmeshError, DistTimeoutError, ErrorContext, InvalidArgumentError } from '../../errors';

export interface SidecarFailure {
  /** The sidecar's error code (BAD_FRAME, TIMEOUT, NCCL_ERROR, …) or a client-side one. */
  readonly sidecarCode: string;
  /** The request's op, when the failure belongs to one. */
  readonly op?: string;
}

/** What a machine lacks for the nccl backend. */
export type NcclMissing = 'sidecar-binary' | 'sidecar' | 'cuda-runtime' | 'device' | 'nccl-library';

const MISSING_TEXT: Record<NcclMissing, string> = {
  'sidecar-binary': 'sidecar binary',
  sidecar: 'a running sidecar',
  'cuda-runtime': 'CUDA runtime',
  device: 'CUDA device',
  'nccl-library': 'NCCL library',
};

/**
 * CUDA or NCCL cannot be used on this machine, or the sidecar is missing: `missing` names what
 * (when known), `reason` says why in the sidecar's words.
 */
export class NcclUnavailableError extends CmeshError implements SidecarFailure {
  override readonly code = 'NCCL_UNAVAILABLE';
  readonly sidecarCode = 'UNAVAILABLE';
  constructor(
    readonly reason: string,
    readonly op?: string,
    readonly missing: readonly NcclMissing[] = [],
  ) {
    super(`nccl backend unavailable${missing.length ? ` (missing: ${missing.map((m) => MISSING_TEXT[m]).join(', ')})` : ''}: ${reason}`, { op });
  }
}

/** An NCCL collective failed (a CUDA/NCCL error, an aborted communicator, the sidecar gone); `sidecarCode` says which. */
export class NcclError extends CmeshError {
  override readonly code = 'NCCL_ERROR';
  constructor(
    message: string,
    readonly sidecarCode: string,
    context: ErrorContext = {},
  ) {
    super(message, context);
  }
}

/** A sidecar request (or the sidecar's own wait) ran past its timeout. */
export class SidecarTimeoutError extends DistTimeoutError implements SidecarFailure {
  readonly sidecarCode = 'TIMEOUT';
  constructor(
    message: string,
    readonly op?: string,
  ) {
    super(message, { op });
  }
}

/** The sidecar rejected a field of the request; nothing changed. */
export class SidecarInvalidArgumentError extends InvalidArgumentError implements SidecarFailure {
  readonly sidecarCode = 'INVALID_ARGUMENT';
  constructor(
    message: string,
    readonly op?: string,
  ) {
    super(message, { op });
  }
}

/** The frame or op was not understood (BAD_FRAME, UNKNOWN_OP), or a reply broke the protocol. */
export class SidecarProtocolError extends CmeshError implements SidecarFailure {
  override readonly code = 'SIDECAR_PROTOCOL';
  constructor(
    message: string,
    readonly sidecarCode: string,
    readonly op?: string,
  ) {
    super(message, { op });
  }
}

/** A CUDA/NCCL failure, an aborted communicator or an unknown handle, as the sidecar reported it. */
export class SidecarRemoteError extends CmeshError implements SidecarFailure {
  override readonly code = 'SIDECAR_ERROR';
  constructor(
    message: string,
    readonly sidecarCode: string,
    readonly op?: string,
  ) {
    super(message, { op });
  }
}

/** The socket could not be reached or closed with requests pending; the sidecar may have died. */
export class SidecarConnectionError extends CmeshError implements SidecarFailure {
  override readonly code = 'SIDECAR_CONNECTION';
  readonly sidecarCode = 'CONNECTION';
  constructor(
    message: string,
    readonly op?: string,
  ) {
    super(message, { op });
  }
}

/** The typed error for an error frame. */
export function errorFromFrame(code: string, message: string, op?: string): CmeshError & SidecarFailure {
  const text = op ? `sidecar ${op}: ${message}` : `sidecar: ${message}`;
  switch (code) {
    case 'TIMEOUT':
      return new SidecarTimeoutError(text, op);
    case 'INVALID_ARGUMENT':
      return new SidecarInvalidArgumentError(text, op);
    case 'UNAVAILABLE':
      return new NcclUnavailableError(message, op);
    case 'BAD_FRAME':
    case 'UNKNOWN_OP':
      return new SidecarProtocolError(text, code, op);
    default:
      return new SidecarRemoteError(text, code, op);
  }
}
