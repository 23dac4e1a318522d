import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

describe('strs', () => {
  it('upper', () => {
    assert.equal('a'.toUpperCase(), 'A');
  });

  it('trim', () => {
    assert.equal(' a '.trim(), 'a');
  });
});
