// The data-plane secrets of the jobs this replica runs, in memory only (never in a bucket): the
// jobs service sets a job's secret when it makes it and deletes it when the job ends; the flight
// recorder's collector checks a rank's signed answer against the secret of the job it claims.
import { Injectable } from '@nestjs/common';

@Injectable()
export class JobSecrets {
  private readonly secrets = new Map<string, string>();

  set(jobId: string, secret: string): void {
    this.secrets.set(jobId, secret);
  }

  get(jobId: string): string | undefined {
    return this.secrets.get(jobId);
  }

  delete(jobId: string): void {
    this.secrets.delete(jobId);
  }
}
