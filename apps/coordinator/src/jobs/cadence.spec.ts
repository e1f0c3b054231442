import { Cadence } from './cadence';

describe('cadence', () => {
  it('is due at once, then once more than a period later', () => {
    const c = new Cadence(2000);
    expect(c.due(10_000)).toBe(true);
    expect(c.due(12_000)).toBe(false);
    expect(c.due(12_001)).toBe(true);
    expect(c.due(12_002)).toBe(false);
  });
});
