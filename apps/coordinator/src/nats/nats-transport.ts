// The coordinator's NATS controllers (AgentsNats, GroupsNats, RendezvousNats, JobsNats) served
// by InboundTransport on the process's one connection: request patterns in the queue group
// `cmesh-coordinator` (one replica answers each), events to every replica.
import { INestApplication } from '@nestjs/common';
import { clusterNames, clusterSubject } from '@cmesh/protocol';
import { InboundTransport } from '@cmesh/protocol/nest';
import { InboundMessages } from './inbound-messages';

const COORDINATOR_QUEUE = 'cmesh-coordinator';

/**
 * Connects the transport to `app` (then app.init(), app.startAllMicroservices()). `connection`
 * is the token of the NatsConnection to use. Returns the transport (closing it stops every
 * subscription, as a replica that died).
 */
export function connectNatsControllers(app: INestApplication, connection: symbol, cluster?: string): InboundTransport {
  const names = clusterNames(cluster);
  const strategy = new InboundTransport({
    connection: () => app.get(connection),
    inbound: () => app.get(InboundMessages).inbound,
    subject: (pattern) => clusterSubject(names, pattern),
    requestQueue: COORDINATOR_QUEUE,
  });
  app.connectMicroservice({ strategy });
  return strategy;
}
