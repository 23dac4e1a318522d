const assert = require('node:assert');

const add = (a, b) => a + b;

describe('math', function () {
  it('adds', function () {
    assert.strictEqual(add(2, 3), 5);
  });

  it('subtracts', function () {
    assert.strictEqual(5 - 3, 3);
  });

  describe('mul', function () {
    for (const [a, b, want] of [[1, 1, 1], [2, 3, 6], [2, 2, 5]]) {
      it(`mul(${a}, ${b}) = ${want}`, function () {
        assert.strictEqual(a * b, want);
      });
    }
  });

  it.skip('divides', function () {
    assert.strictEqual(1 / 0, 0);
  });

  it('rounds');
});

it('top level passes', function () {
  assert.ok(true);
});
