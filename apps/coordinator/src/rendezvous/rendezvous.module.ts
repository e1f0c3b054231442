import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { RendezvousController } from './rendezvous.controller';
import { RendezvousNats } from './rendezvous.nats';
import { RendezvousService } from './rendezvous.service';

@Module({ imports: [AgentsModule], controllers: [RendezvousController, RendezvousNats], providers: [RendezvousService], exports: [RendezvousService] })
export class RendezvousModule {}
