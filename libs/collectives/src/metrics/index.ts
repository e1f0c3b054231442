export * from './names';
export {
  CollectiveMetrics,
  MetricsExporter,
  startMetricsExporter,
  startExporterFromEnv,
  startLauncherExporter,
  LAUNCHER_METRICS_PORT_ENV,
  LAUNCHER_METRICS_HOST_ENV,
} from './exporter';
