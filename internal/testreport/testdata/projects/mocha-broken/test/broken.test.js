const missing = require('./does-not-exist');

it('never runs', function () {
  if (!missing) throw new Error('missing');
});
