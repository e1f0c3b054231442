import { InvalidArgumentError } from '../errors';
import type { StoreValue } from './store';

export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidArgumentError(`store key must be a non-empty string, got ${JSON.stringify(key)}`);
  }
}

export function checkKeys(keys: unknown): asserts keys is string[] {
  if (!Array.isArray(keys)) throw new InvalidArgumentError('store keys must be an array of strings');
  keys.forEach(checkKey);
}

export function checkValue(value: unknown): asserts value is StoreValue {
  if (typeof value !== 'string' && !(value instanceof Uint8Array)) {
    throw new InvalidArgumentError('store value must be a string or a Uint8Array');
  }
}

export function checkAmount(amount: unknown): asserts amount is number {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount)) {
    throw new InvalidArgumentError(`store add() amount must be an integer, got ${String(amount)}`);
  }
}

export function checkTimeout(ms: unknown): asserts ms is number {
  if (typeof ms !== 'number' || !(ms >= 0)) throw new InvalidArgumentError(`timeout must be a non-negative number of ms, got ${String(ms)}`);
}
