// The nats:// init method of a process group whose store prefix the coordinator chose (a job's, a
// service group's).

/** `nats://h:p` + `jobs/abc` -> `nats://h:p/jobs-abc` (the init method takes one path segment). */
export function natsInitMethod(natsUrl: string, prefix: string): string {
  const base = natsUrl.split(',')[0].replace(/\/+$/, '');
  return `${base}/${prefix.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}
