import { test, expect } from 'vitest';

test('passes but leaves a timer that throws', () => {
  setTimeout(() => {
    throw new Error('late failure');
  }, 0);
  expect(1).toBe(1);
});

test('waits', async () => {
  await new Promise((r) => setTimeout(r, 20));
});
