export { AppModule } from './app.module';
export { startCoordinator } from './main';
/** AppModule alone serves REST; this adds its NATS controllers (startCoordinator does both). */
export { connectNatsControllers } from './nats/nats-transport';
export { CoordinatorSettings, coordinatorHelp, loadCoordinatorConfig, CoordinatorConfig } from './config/coordinator-config';
