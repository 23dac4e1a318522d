import { describe, test, expect } from 'vitest';

describe('strs', () => {
  test('upper', () => {
    expect('a'.toUpperCase()).toBe('A');
  });

  test('trim', () => {
    expect(' a '.trim()).toBe('a');
  });
});
