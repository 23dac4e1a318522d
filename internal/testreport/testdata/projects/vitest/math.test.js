import { describe, test, expect } from 'vitest';

const add = (a, b) => a + b;

describe('math', () => {
  test('adds', () => {
    expect(add(2, 3)).toBe(5);
  });

  test('subtracts', () => {
    expect(5 - 3).toBe(3);
  });

  describe('mul', () => {
    test.each([
      [1, 1, 1],
      [2, 3, 6],
      [2, 2, 5],
    ])('mul(%i, %i) = %i', (a, b, want) => {
      expect(a * b).toBe(want);
    });
  });

  test.skip('divides', () => {
    expect(1 / 0).toBe(0);
  });

  test.todo('rounds');
});

test('top level passes', () => {
  expect(true).toBe(true);
});
