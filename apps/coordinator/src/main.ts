// Starts the coordinator: `node -r @swc-node/register apps/coordinator/src/main.ts --nats URL --port N`.
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { exitOnFatal } from '@cmesh/protocol';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { HttpErrorFilter, httpClientErrors } from './http/http-error.filter';
import { NATS_CONNECTION } from './nats/nats-connection';
import { connectNatsControllers } from './nats/nats-transport';
import { wantsHelp } from '@cmesh/protocol';
import { CoordinatorConfig, coordinatorHelp, loadCoordinatorConfig } from './config/coordinator-config';

export async function startCoordinator(config: CoordinatorConfig) {
  const app = await NestFactory.create(AppModule.forRoot(config), { bufferLogs: true });
  app.useLogger(app.get(Logger));
  app.enableShutdownHooks();
  // every error answered in the standard shape, also those raised before a handler runs
  app.useGlobalFilters(new HttpErrorFilter());
  httpClientErrors(app.getHttpServer());
  const doc = new DocumentBuilder().setTitle('cmesh coordinator').setDescription('agents, rendezvous, process groups and jobs').setVersion('1').build();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, doc));
  connectNatsControllers(app, NATS_CONNECTION, config.cluster);
  // the services open their KV state first (onModuleInit), then NATS requests are taken
  await app.init();
  await app.startAllMicroservices();
  await app.listen(config.httpPort, config.httpHost);
  return app;
}

if (require.main === module) {
  exitOnFatal('coordinator');
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(coordinatorHelp());
    process.exit(0);
  }
  let config: CoordinatorConfig;
  try {
    config = loadCoordinatorConfig();
  } catch (e) {
    console.error(`coordinator: ${(e as Error).message}`);
    process.exit(2);
  }
  startCoordinator(config).then(
    async (app) => console.log(`cmesh coordinator listening on ${(await app.getUrl()).replace('[::1]', '127.0.0.1')} (nats ${config.natsUrl})`),
    (e: Error) => {
      console.error(`coordinator failed to start: ${e.message}`);
      process.exit(1);
    },
  );
}
