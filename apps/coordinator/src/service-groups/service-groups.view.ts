// What GET /service-groups and cmesh status show of collectives as a service: each group's current
// round (ServiceGroupsService's view of the state bucket), and for a placed group the op each rank runs now, asked of the
// group's member workers on its status subject (one request, one answer per rank, a short wait;
// the ranks that did not answer are named, not waited for). The request and every answer carry
// the group's MAC: a worker answers only the coordinator, and only the group's workers count.
import { Inject, Injectable } from '@nestjs/common';
import { NatsConnection, createInbox, headers } from '@nats-io/nats-core';
import { connectionInboxPrefix } from '@cmesh/collectives/nats';
import {
  ClusterNames,
  SERVICE_GROUP_MAC_HEADER,
  SERVICE_GROUP_STATUS_DEFAULT_MS,
  ServiceGroupSummary,
  ServiceGroupDetail,
  ServiceGroupRankStatus,
  ServiceGroupRankStatusSchema,
  ServiceGroupRound,
  ServiceGroupEnd,
  decodeMessage,
  serviceGroupKeys,
  serviceGroupKeyFrom,
  serviceGroupMac,
  serviceGroupMacValid,
} from '@cmesh/protocol';
import { CLUSTER_NAMES } from '../config/coordinator-config';
import { NATS_CONNECTION } from '../nats/nats.module';
import { ReplyError } from '../nats/reply-error';
import { ServiceGroupsService } from './service-groups.service';

/** A round as the REST API shows it. */
function serviceGroupView(r: ServiceGroupRound): ServiceGroupSummary {
  return {
    name: r.name,
    round: r.round,
    state: r.state,
    size: r.size,
    ...(r.placed && !r.placed.error ? { backend: r.placed.backend ?? 'tcp' } : r.backend ? { backend: r.backend } : {}),
    ...(r.elastic ? { elastic: r.elastic } : {}),
    ...(r.closesAt && r.state === 'waiting' ? { closesAt: r.closesAt } : {}),
    joined: r.joined.length,
    members: r.placed?.members.length ? r.placed.members : r.joined.map((j) => ({ member: j.member, ...(j.label ? { label: j.label } : {}) })),
    ...(r.placedAt ? { placedAt: r.placedAt } : {}),
    ...(r.endedAt ? { endedAt: r.endedAt } : {}),
    ...(r.end ? { end: withoutGroupId(r.end) } : {}),
    ...(r.placed?.error ? { error: r.placed.error } : {}),
    updatedAt: r.updatedAt,
  };
}

/** The end notice less its group id (the group is the one shown). */
function withoutGroupId({ groupId: _, ...end }: ServiceGroupEnd): NonNullable<ServiceGroupSummary['end']> {
  return end;
}

@Injectable()
export class ServiceGroupsView {
  constructor(
    private readonly rounds: ServiceGroupsService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(CLUSTER_NAMES) private readonly names: ClusterNames,
  ) {}

  /** Every group's current round, by name. */
  async list(): Promise<ServiceGroupSummary[]> {
    const rounds = await this.rounds.list();
    return rounds.map(serviceGroupView).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** One group; a placed one with the ops its ranks run now. */
  async get(name: string, waitMs = SERVICE_GROUP_STATUS_DEFAULT_MS): Promise<ServiceGroupDetail> {
    const r = (await this.rounds.list()).find((x) => x.name === name);
    if (!r) throw new ReplyError('NOT_FOUND', `no service group ${JSON.stringify(name)}`);
    const view = serviceGroupView(r);
    if (r.state !== 'placed' || !r.placed) return view;
    return { ...view, inFlight: await this.inFlight(r.placed.groupId, r.size, serviceGroupKeyFrom(r.secret), waitMs) };
  }

  /** The ranks' answers on the group's status subject, until all `size` answered or `waitMs` is over. */
  private async inFlight(groupId: string, size: number, secret: Buffer | null, waitMs: number): Promise<NonNullable<ServiceGroupDetail['inFlight']>> {
    const started = Date.now();
    const ranks = new Map<number, ServiceGroupRankStatus>();
    if (secret) await this.ask(groupId, serviceGroupKeys(secret).mac, size, waitMs, ranks);
    const missing = Array.from({ length: size }, (_, i) => i).filter((i) => !ranks.has(i));
    return { ranks: [...ranks.values()].sort((a, b) => a.rank - b.rank), missing, waitedMs: Date.now() - started };
  }

  /** One request under the group's MAC (its body names the reply subject); answers without the MAC do not count. */
  private ask(groupId: string, mac: Buffer, size: number, waitMs: number, ranks: Map<number, ServiceGroupRankStatus>): Promise<void> {
    // under the login's own prefix (natsLogin): the only inboxes its permissions let it read
    const inbox = createInbox(connectionInboxPrefix(this.nc));
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        sub.unsubscribe();
        resolve();
      };
      const sub = this.nc.subscribe(inbox, {
        callback: (err, m) => {
          try {
            if (err || m.headers?.code === 503) return done();
            if (!serviceGroupMacValid(mac, inbox, m.headers, m.data)) return;
            const d = decodeMessage(ServiceGroupRankStatusSchema, m.data);
            if (!d.ok || d.value.rank >= size) return;
            ranks.set(d.value.rank, d.value);
            if (ranks.size === size) done();
          } catch {
            /* a malformed answer is no answer */
          }
        },
      });
      const timer = setTimeout(done, waitMs);
      const subject = this.names.serviceGroups.status(groupId);
      const body = Buffer.from(JSON.stringify({ reply: inbox }));
      const h = headers();
      h.set(SERVICE_GROUP_MAC_HEADER, serviceGroupMac(mac, subject, undefined, undefined, body));
      this.nc.publish(subject, body, { headers: h, reply: inbox });
    });
  }
}
