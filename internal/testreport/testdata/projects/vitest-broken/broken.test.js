import { test, expect } from 'vitest';
import missing from './does-not-exist.js';

test('never runs', () => {
  expect(missing).toBeDefined();
});
