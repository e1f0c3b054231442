// The rank agent process: `node -r @swc-node/register apps/rank-agent/src/main.ts [--name a0 ...]`
// (or the variables of AgentSettings; `--help` lists them).
// A NestJS app: HTTP for /health and /metrics; NATS controllers through InboundTransport on its one connection.
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { Logger as PinoLogger } from 'nestjs-pino';
import { NestFactory } from '@nestjs/core';
import { exitOnFatal, wantsHelp } from '@cmesh/protocol';
import { AppModule } from './app.module';
import { agentHelp, loadConfig } from './config';
import { connectNatsControllers } from './nats/nats-transport';
import { RegistrationService } from './registration/registration.service';

export async function bootstrap(argv = process.argv.slice(2)) {
  const config = loadConfig(argv);
  const app = await NestFactory.create(AppModule.forRoot(config), { bufferLogs: true });
  app.useLogger(app.get(PinoLogger));
  app.enableShutdownHooks();
  connectNatsControllers(app, config);
  await app.init();
  // subscribed before the agent registers: no assignment can come before it listens
  await app.startAllMicroservices();
  await app.listen(config.httpPort, config.bindHost);
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  await app.get(RegistrationService).start(url);
  new Logger('Agent').log(`agent ${config.name} (${config.agentId}) ready: http ${url}, nats ${config.natsUrl}, pid ${process.pid}`);
  return app;
}

if (require.main === module) {
  exitOnFatal(`rank-agent ${process.env.CMESH_AGENT_NAME ?? ''}`.trim());
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(agentHelp());
    process.exit(0);
  }
  bootstrap().catch((err: Error) => {
    console.error(`rank-agent: ${err.message}`);
    process.exit(1);
  });
}
