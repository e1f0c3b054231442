// Where `cmesh up` keeps what must outlive one start: the secrets it generated at first start (the
// API token, NATS passwords) and the nats-server configuration made from them. Files are 0600 in
// a 0700 directory; `cmesh status` reads the API token from here for a local coordinator.
import { homedir } from 'os';
import { join } from 'path';

export interface StateDirFiles {
  dir: string;
  apiToken: string;
  /** one password per NATS user: nats/<user>.password */
  natsDir: string;
  natsConf: string;
}

/** CMESH_STATE_DIR, else ~/.cmesh. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.CMESH_STATE_DIR || join(homedir(), '.cmesh');
}

export function stateDirFiles(env: NodeJS.ProcessEnv = process.env, dir = stateDir(env)): StateDirFiles {
  return { dir, apiToken: join(dir, 'api-token'), natsDir: join(dir, 'nats'), natsConf: join(dir, 'nats', 'nats-server.conf') };
}
