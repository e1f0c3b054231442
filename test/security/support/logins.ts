// The NATS logins a security test acts as: each with its own inbox prefix (the only inboxes its
// permissions let it read), no reconnect, and the permission violations the server reported to
// it; every connection is closed by closeAll().
import { readFileSync } from 'fs';
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { join } from 'path';

export interface TestLogin {
  nc: NatsConnection;
  /** what the server answered with -ERR (permission violations), as `<error class>: <message>`, in order */
  violations: string[];
}

export class TestLogins {
  private readonly open: NatsConnection[] = [];

  /** `servers` and `password` are read at login: a test's mesh starts after this is made. */
  constructor(
    private readonly servers: () => string,
    private readonly password: (user: string) => string,
  ) {}

  async login(user: string): Promise<TestLogin> {
    const nc = await connect({ servers: this.servers(), user, pass: this.password(user), inboxPrefix: `_INBOX.${user}`, reconnect: false });
    this.open.push(nc);
    const violations: string[] = [];
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'error') violations.push(`${s.error.name}: ${s.error.message}`);
    })();
    return { nc, violations };
  }

  async closeAll(): Promise<void> {
    for (const nc of this.open.splice(0)) await nc.close().catch(() => undefined);
  }
}

/** The password `cmesh up` (prepareMeshAuth) keeps for `user` in its state directory. */
export const statePassword = (stateDir: () => string) => (user: string) => readFileSync(join(stateDir(), 'nats', `${user}.password`), 'utf8').trim();
