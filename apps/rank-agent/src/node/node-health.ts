// The node mode's readiness check (the GPU DaemonSet's probe): exits 0 when every agent of the
// node answers /health, 1 naming the ones that do not. Same settings as the supervisor:
// CMESH_DEVICES (a count), CMESH_HTTP_PORT (agent i on port + i), CMESH_AGENT_HOST.
//   node apps/rank-agent/dist/node/node-health.js
const TIMEOUT_MS = 2000;

export async function nodeHealth(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const n = Number(env.CMESH_DEVICES);
  const base = Number(env.CMESH_HTTP_PORT);
  if (!Number.isInteger(n) || n < 1) return [`CMESH_DEVICES must be a count, got ${JSON.stringify(env.CMESH_DEVICES)}`];
  if (!Number.isInteger(base) || base < 1) return [`CMESH_HTTP_PORT must be a port (agent i serves on it + i), got ${JSON.stringify(env.CMESH_HTTP_PORT)}`];
  const host = env.CMESH_AGENT_HOST || '127.0.0.1';
  const down = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const url = `http://${host.includes(':') ? `[${host}]` : host}:${base + i}/health`;
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
        return r.ok ? null : `device ${i}: ${url} answered ${r.status}`;
      } catch (e) {
        return `device ${i}: ${url}: ${(e as Error).message}`;
      }
    }),
  );
  return down.filter((d): d is string => d !== null);
}

if (require.main === module) {
  nodeHealth().then(
    (down) => {
      if (down.length > 0) process.stderr.write(down.join('\n') + '\n');
      process.exit(down.length > 0 ? 1 : 0);
    },
    (e: Error) => {
      process.stderr.write(`node health: ${e.message}\n`);
      process.exit(1);
    },
  );
}
