export { AppModule } from './app.module';
export { startCoordinator } from './main';
export { loadCoordinatorConfig, CoordinatorConfig } from './config/coordinator-config';
