import { InvalidArgumentError } from '@cmesh/collectives/errors';
import { timeoutOf } from './service-group';

describe('timeoutOf: a join or op deadline, `timeout` as in the library, `timeoutMs` its earlier name', () => {
  it('takes either name, or neither', () => {
    expect(timeoutOf({ timeout: 1500 })).toBe(1500);
    expect(timeoutOf({ timeoutMs: 2500 })).toBe(2500);
    expect(timeoutOf({ timeout: 3000, timeoutMs: 3000 })).toBe(3000);
    expect(timeoutOf({})).toBeUndefined();
    expect(timeoutOf(undefined)).toBeUndefined();
  });

  it('refuses both names with different values', () => {
    expect(() => timeoutOf({ timeout: 1000, timeoutMs: 2000 })).toThrow(InvalidArgumentError);
    expect(() => timeoutOf({ timeout: 1000, timeoutMs: 2000 })).toThrow(/give timeout only/);
  });
});
