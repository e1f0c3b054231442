// Why a job cannot be accepted, with the HTTP status the REST API answers (the NATS API
// carries the same status and message).
export class JobRejectedError extends Error {
  override name = 'JobRejectedError';
  constructor(
    readonly status: 400 | 404 | 409 | 503,
    message: string,
  ) {
    super(message);
  }
}
