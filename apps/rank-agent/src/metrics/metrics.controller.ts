// GET /metrics: the Prometheus text exposition of this agent's registry.
import { Controller, Get, Header } from '@nestjs/common';
import { AgentMetrics } from './agent-metrics';

@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: AgentMetrics) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
