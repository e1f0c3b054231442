// The agent's NATS controllers (JobSubjects, GroupEvents) served by InboundTransport on the
// agent's one connection (NatsService); events only, so no queue group.
import { INestApplication } from '@nestjs/common';
import { clusterNames, clusterSubject } from '@cmesh/protocol';
import { InboundTransport } from '@cmesh/protocol/nest';
import { AgentConfig } from '../config';
import { InboundMessages } from './inbound-messages';
import { NatsService } from './nats.service';

/** Connects the transport to `app` (then app.init(), app.startAllMicroservices()). */
export function connectNatsControllers(app: INestApplication, config: AgentConfig): InboundTransport {
  const names = clusterNames(config.cluster);
  const strategy = new InboundTransport({
    connection: () => app.get(NatsService).connection(),
    inbound: () => app.get(InboundMessages).inbound,
    // the agent's own notifications: agents.events.<its id>
    subject: (pattern) => clusterSubject(names, pattern, config.agentId),
  });
  app.connectMicroservice({ strategy });
  return strategy;
}
