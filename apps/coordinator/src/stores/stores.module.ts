// Store buckets: <cluster>.stores.open creates a rank's missing store bucket (only the coordinator
// may create streams), with the limits of the coordinator's configuration.
import { Global, Module } from '@nestjs/common';
import { COORDINATOR_CONFIG, CoordinatorConfig } from '../config/coordinator-config';
import { STORE_LIMITS, StoresNats } from './stores.nats';
import { StoreLimits } from './store-buckets';

@Global()
@Module({
  controllers: [StoresNats],
  providers: [
    {
      provide: STORE_LIMITS,
      inject: [COORDINATOR_CONFIG],
      useFactory: (c: CoordinatorConfig): StoreLimits => ({ maxBytes: c.storeMaxBytes, maxAgeS: c.storeMaxAgeS }),
    },
  ],
  exports: [STORE_LIMITS],
})
export class StoresModule {}
