// Starts the coordinator: `node -r @swc-node/register apps/coordinator/src/main.ts --nats URL --port N`.
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { exitOnFatal } from '@cmesh/protocol/kit';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { HttpErrorFilter, httpClientErrors } from './http/http-error.filter';
import { NATS_CONNECTION } from './nats/nats-connection';
import { connectNatsControllers } from './nats/nats-transport';
import { wantsHelp } from '@cmesh/protocol/kit';
import { CoordinatorConfig, coordinatorHelp, loadApiTokens, loadCoordinatorConfig } from './config/coordinator-config';
import { ApiTokens, authEnabled } from './http/api-auth.guard';
import { BEARER_SCHEME, declareSecurity } from './http/openapi';
import { STOP_GRACE_MS } from './jobs/jobs.service';

/** What shutdown hooks other than the running jobs' grace (NATS drains, KV hand-overs) may take. */
const SHUTDOWN_MARGIN_MS = 15_000;

export async function startCoordinator(config: CoordinatorConfig, tokens: ApiTokens = loadApiTokens()) {
  const app = await NestFactory.create(AppModule.forRoot(config, tokens), { bufferLogs: true });
  app.useLogger(app.get(Logger));
  app.enableShutdownHooks();
  // every error answered in the standard shape, also those raised before a handler runs
  app.useGlobalFilters(new HttpErrorFilter());
  httpClientErrors(app.getHttpServer());
  const doc = new DocumentBuilder()
    .setTitle('cmesh coordinator')
    .setDescription('agents, rendezvous, process groups and jobs')
    .setVersion('1')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'CMESH_API_TOKEN (every route) or CMESH_API_READ_TOKEN (GET routes)' }, BEARER_SCHEME)
    .build();
  SwaggerModule.setup('docs', app, () => declareSecurity(SwaggerModule.createDocument(app, doc), authEnabled(tokens)));
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
  let tokens: ApiTokens;
  try {
    config = loadCoordinatorConfig();
    tokens = loadApiTokens();
  } catch (e) {
    console.error(`coordinator: ${(e as Error).message}`);
    process.exit(2);
  }
  // graceful stop (running jobs get STOP_GRACE_MS) is bounded as a whole: whatever a shutdown hook
  // waits on, a stopping replica exits, and its supervisor or Kubernetes starts it again
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      setTimeout(() => {
        // what still holds the process (a server not closed, a socket, a timer) says which hook hangs
        const held = process.getActiveResourcesInfo().reduce<Record<string, number>>((n, r) => ({ ...n, [r]: (n[r] ?? 0) + 1 }), {});
        console.error(
          `coordinator: did not stop within ${(STOP_GRACE_MS + SHUTDOWN_MARGIN_MS) / 1000} s of ${sig}; exiting (still open: ${JSON.stringify(held)})`,
        );
        process.exit(1);
      }, STOP_GRACE_MS + SHUTDOWN_MARGIN_MS).unref();
    });
  }
  startCoordinator(config, tokens).then(
    async (app) => console.log(`cmesh coordinator listening on ${(await app.getUrl()).replace('[::1]', '127.0.0.1')} (nats ${config.natsUrl})`),
    (e: Error) => {
      console.error(`coordinator failed to start: ${e.message}`);
      process.exit(1);
    },
  );
}
