// The live page (/ui) and its login (/ui/login). `imports` must provide the jobs and scans modules
// the coordinator made.
import { DynamicModule, Module, ModuleMetadata } from '@nestjs/common';
import { UiController } from './ui.controller';
import { UiLoginController } from './ui-login.controller';

@Module({})
export class UiModule {
  static forRoot(opts: { imports: ModuleMetadata['imports'] }): DynamicModule {
    return { module: UiModule, imports: opts.imports, controllers: [UiController, UiLoginController] };
  }
}
