import { describe, it, test } from 'node:test';
import assert from 'node:assert/strict';

const add = (a, b) => a + b;

describe('math', () => {
  it('adds', () => {
    assert.equal(add(2, 3), 5);
  });

  it('subtracts', () => {
    assert.equal(5 - 3, 3);
  });

  describe('mul', () => {
    for (const [a, b, want] of [[1, 1, 1], [2, 3, 6], [2, 2, 5]]) {
      it(`mul(${a}, ${b}) = ${want}`, () => {
        assert.equal(a * b, want);
      });
    }
  });

  it('divides', { skip: 'not on this platform' }, () => {});

  it('rounds', { todo: true });
});

test('top level passes', () => {
  assert.ok(true);
});

test('with subtests', async (t) => {
  await t.test('first', () => {});
  await t.test('second', () => {
    assert.fail('boom');
  });
});
