// Ties a running mesh to this process: Ctrl-C / SIGTERM / SIGHUP stop it cleanly, an uncaught
// error stops it too, and a synchronous SIGKILL sweep on 'exit' leaves no child behind.
import type { Mesh } from './launch';

export function holdMesh(mesh: Mesh, log: (s: string) => void): Promise<number> {
  const lastResort = () => mesh.supervisor.killAllNow();
  process.on('exit', lastResort);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (why: string, code: number) => {
      if (stopping) return;
      stopping = true;
      log(`cmesh: ${why}; stopping ${mesh.supervisor.pids().length} processes`);
      mesh
        .stop()
        .catch((e: Error) => log(`cmesh: stop failed: ${e.message}`))
        .finally(() => {
          for (const s of SIGNALS) process.removeListener(s, handlers[s]);
          process.removeListener('uncaughtException', onError);
          process.removeListener('exit', lastResort);
          resolve(code);
        });
    };
    const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
    const handlers = Object.fromEntries(SIGNALS.map((s) => [s, () => stop(`${s} received`, 0)])) as Record<string, () => void>;
    for (const s of SIGNALS) process.on(s, handlers[s]);
    const onError = (e: Error) => stop(`error: ${e.message}`, 1);
    process.on('uncaughtException', onError);
    void mesh.died.then((why) => stop(why, 1));
  });
}

/** Same protection while a command runs against a mesh it started (demo). */
export async function withMesh<T>(mesh: Mesh, log: (s: string) => void, body: () => Promise<T>): Promise<T> {
  const lastResort = () => mesh.supervisor.killAllNow();
  process.on('exit', lastResort);
  let interrupted: (() => void) | null = null;
  const onSignal = () => interrupted?.();
  const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of SIGNALS) process.on(s, onSignal);
  try {
    return await Promise.race([
      body(),
      new Promise<never>((_, reject) => (interrupted = () => reject(new Error('interrupted')))),
      mesh.died.then((why) => Promise.reject(new Error(`mesh process died: ${why}`))),
    ]);
  } finally {
    log('cmesh: stopping the mesh');
    await mesh.stop();
    for (const s of SIGNALS) process.removeListener(s, onSignal);
    process.removeListener('exit', lastResort);
  }
}
