import { z } from 'zod';
import { SettingsError, intSetting, loadSettings, setting, settingsHelp, wantsHelp } from './settings';

const Demo = z.object({
  url: setting(z.string().default('nats://h:4222'), { env: 'DEMO_URL', flag: '--url', help: 'where' }),
  port: setting(intSetting(0, 10).default(7), { env: 'DEMO_PORT', flag: '--port', help: 'which port' }),
  name: setting(z.string().optional(), { env: 'DEMO_NAME', flag: '--name', help: 'who', defaultText: '<host>' }),
});

describe('settings from one schema', () => {
  it('defaults, then the environment, then flags (--flag value and --flag=value)', () => {
    expect(loadSettings(Demo, [], {})).toEqual({ url: 'nats://h:4222', port: 7, name: undefined });
    expect(loadSettings(Demo, [], { DEMO_PORT: '3', DEMO_NAME: 'a' })).toEqual({ url: 'nats://h:4222', port: 3, name: 'a' });
    expect(loadSettings(Demo, ['--port', '4', '--name=b'], { DEMO_PORT: '3', DEMO_NAME: 'a' })).toEqual({ url: 'nats://h:4222', port: 4, name: 'b' });
  });

  it('names the variable, the flag and the value that is wrong', () => {
    expect(() => loadSettings(Demo, ['--port', '11'], {})).toThrow(new SettingsError('DEMO_PORT (--port): must be an integer in [0, 10], got "11"'));
    expect(() => loadSettings(Demo, [], { DEMO_PORT: '1.5' })).toThrow('DEMO_PORT (--port): must be an integer in [0, 10], got "1.5"');
    expect(() => loadSettings(Demo, ['--bogus', '1'], {})).toThrow('unknown flag --bogus; known: --url --port --name --help');
    expect(() => loadSettings(Demo, ['--url'], {})).toThrow('--url needs a value');
  });

  it('--help lists every flag with its variable, help and default', () => {
    expect(wantsHelp(['--port', '1', '-h'])).toBe(true);
    expect(wantsHelp(['--port', '1'])).toBe(false);
    const lines = settingsHelp(Demo, 'demo [flags]').split('\n');
    expect(lines[0]).toBe('usage: demo [flags]');
    expect(lines.find((l) => l.includes('--url'))).toMatch(/--url <value>\s+DEMO_URL\s+where \(default nats:\/\/h:4222\)$/);
    expect(lines.find((l) => l.includes('--port'))).toMatch(/DEMO_PORT\s+which port \(default 7\)$/);
    expect(lines.find((l) => l.includes('--name'))).toMatch(/DEMO_NAME\s+who \(default <host>\)$/);
    expect(lines.find((l) => l.includes('--help'))).toMatch(/--help, -h\s+this text$/);
  });
});
