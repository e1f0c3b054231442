// The rank agent process: `node -r @swc-node/register apps/rank-agent/src/main.ts [--name a0 ...]`
// (or NATS_URL, CMESH_AGENT_NAME, CMESH_DEVICE_INDEX, CMESH_DATA_PORTS, CMESH_HTTP_PORT).
// A NestJS app: HTTP for /health and /metrics, plus the NATS microservice for job subjects.
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { Logger as PinoLogger } from 'nestjs-pino';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { AppModule } from './app.module';
import { loadConfig } from './config';
import { RegistrationService } from './registration/registration.service';

export async function bootstrap(argv = process.argv.slice(2)) {
  const config = loadConfig(argv);
  const app = await NestFactory.create(AppModule.forRoot(config), { bufferLogs: true });
  app.useLogger(app.get(PinoLogger));
  app.enableShutdownHooks();
  app.connectMicroservice<MicroserviceOptions>({ transport: Transport.NATS, options: { servers: [config.natsUrl], name: `cmesh-agent-${config.name}-rx` } });
  await app.startAllMicroservices();
  await app.listen(config.httpPort, config.bindHost);
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  await app.get(RegistrationService).start(url);
  new Logger('Agent').log(`agent ${config.name} (${config.agentId}) ready: http ${url}, nats ${config.natsUrl}, pid ${process.pid}`);
  return app;
}

if (require.main === module) {
  bootstrap().catch((err: Error) => {
    console.error(`rank-agent: ${err.message}`);
    process.exit(1);
  });
}
