export * from './names';
export { CollectiveMetrics, MetricsExporter, startMetricsExporter, startExporterFromEnv } from './exporter';
