// How every cmesh process logs in to NATS: NATS_USER with NATS_PASSWORD (or the file
// NATS_PASSWORD_FILE names), and TLS when NATS_TLS_CA_FILE names the CA that signed the server's
// certificate (a `tls://` URL asks for TLS too). Children inherit these, so an agent's job worker
// and `cmesh run`'s workers log in as their launcher does. Never part of a URL: URLs are logged.
import { readFileSync } from 'fs';
import { InvalidArgumentError } from '../errors';

export interface NatsLogin {
  user?: string;
  pass?: string;
  tls?: { caFile: string };
  /**
   * `_INBOX.<user>`: replies to a login's requests arrive under its own prefix, the only inboxes
   * its permissions let it subscribe, so no other login reads them (natsInboxPrefix).
   */
  inboxPrefix?: string;
}

/** The inbox prefix of a NATS user: the only `_INBOX` subjects its permissions let it read. */
export const natsInboxPrefix = (user: string) => `_INBOX.${user}`;

/** The inbox prefix a connection was opened with (natsLogin's), for an inbox made by hand: createInbox(connectionInboxPrefix(nc)). */
export const connectionInboxPrefix = (nc: object): string | undefined => (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;

/** The login options for nats.connect() from the environment; {} when none is set. */
export function natsLogin(env: NodeJS.ProcessEnv = process.env): NatsLogin {
  const out: NatsLogin = {};
  const user = env.NATS_USER || undefined;
  let pass = env.NATS_PASSWORD || undefined;
  const passFile = env.NATS_PASSWORD_FILE || undefined;
  if (pass && passFile) throw new InvalidArgumentError('NATS_PASSWORD and NATS_PASSWORD_FILE are both set; set one');
  if (passFile) {
    try {
      pass = readFileSync(passFile, 'utf8').trim();
    } catch (e) {
      throw new InvalidArgumentError(`NATS_PASSWORD_FILE: cannot read ${passFile} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  if (pass && !user) throw new InvalidArgumentError('a NATS password is set but NATS_USER is not');
  if (user) Object.assign(out, { user, pass, inboxPrefix: natsInboxPrefix(user) });
  const ca = env.NATS_TLS_CA_FILE || undefined;
  if (ca) out.tls = { caFile: ca };
  return out;
}

// and how every cmesh process stays connected (reconnects; the typed error when an op's deadline passes while down)
export { NATS_RECONNECT, ConnectionWatch, connectionLost, natsServers, watchConnection } from './nats-reconnect';
