// Says how far a stopping replica got. Nest runs a phase's hooks module by module, the root
// module's last, so this provider (in AppModule) logs once every other module's hooks of that
// phase returned; the HTTP server and the NATS transport close between the two phases.
import { BeforeApplicationShutdown, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';

@Injectable()
export class ShutdownLog implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly log = new Logger('Shutdown');
  private closingSince = 0;

  beforeApplicationShutdown(signal?: string): void {
    this.closingSince = Date.now();
    this.log.log(`${signal ?? 'stop'}: its jobs finished or their grace ran out; closing the HTTP server, the NATS transport and the state`);
  }

  onApplicationShutdown(signal?: string): void {
    this.log.log(`${signal ?? 'stop'}: closed in ${Date.now() - this.closingSince} ms`);
  }
}
