const assert = require('node:assert');

describe('strs', function () {
  it('upper', function () {
    assert.strictEqual('a'.toUpperCase(), 'A');
  });

  it('trim', function () {
    assert.strictEqual(' a '.trim(), 'a');
  });
});
