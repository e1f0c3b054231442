// The REST API's credentials for every module: the bearer tokens and the live page's sessions
// made from them (the guard checks both; the login route issues sessions).
import { DynamicModule, Global, Module } from '@nestjs/common';
import { API_TOKENS, ApiTokens } from './api-auth.guard';
import { UiSessions } from './ui-session';

@Global()
@Module({})
export class AuthModule {
  static forRoot(tokens: ApiTokens): DynamicModule {
    return {
      module: AuthModule,
      providers: [
        { provide: API_TOKENS, useValue: tokens },
        { provide: UiSessions, useValue: new UiSessions(tokens) },
      ],
      exports: [API_TOKENS, UiSessions],
    };
  }
}
