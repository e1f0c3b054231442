import { DynamicModule, Module } from '@nestjs/common';
import { TraceController } from './trace.controller';
import { TraceService } from './trace.service';

@Module({})
export class TraceModule {
  /** `jobs`: the app's JobsModule (its JobsService finds the jobs running on a coordinator group) */
  static forRoot(jobs: DynamicModule): DynamicModule {
    return { module: TraceModule, imports: [jobs], controllers: [TraceController], providers: [TraceService], exports: [TraceService] };
  }
}
