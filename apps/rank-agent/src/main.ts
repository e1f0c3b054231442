// The rank agent process: `node -r @swc-node/register apps/rank-agent/src/main.ts [--name a0 ...]`
// (or the variables of AgentSettings; `--help` lists them).
// A NestJS app: HTTP for /health and /metrics; NATS controllers through InboundTransport on its one connection.
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { Logger as PinoLogger } from 'nestjs-pino';
import { NestFactory } from '@nestjs/core';
import { exitOnFatal, wantsHelp } from '@cmesh/protocol/kit';
import { AppModule } from './app.module';
import { agentHelp, loadConfig } from './config';
import { connectNatsControllers } from './nats/nats-transport';
import { runNodeMode } from './node/node-mode';
import { NODE_MODE_HELP, takeDevicesFlag } from './node/node-plan';
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
    process.stdout.write(agentHelp() + NODE_MODE_HELP);
    process.exit(0);
  }
  // --devices (CMESH_DEVICES): one agent per device of the node, supervised by this process
  const fail = (err: Error) => {
    console.error(`rank-agent: ${err.message}`);
    process.exit(1);
  };
  try {
    const { devices, rest } = takeDevicesFlag(process.argv.slice(2));
    const nodeDevices = devices ?? (process.env.CMESH_DEVICES || undefined);
    if (nodeDevices) runNodeMode(nodeDevices, rest).then((code) => process.exit(code), fail);
    else bootstrap(rest).catch(fail);
  } catch (e) {
    fail(e as Error);
  }
}
