use strict;
use warnings;
use Test::More tests => 7;

sub add { return $_[0] + $_[1] }

ok(add(2, 3) == 5, 'adds');
is(5 - 3, 3, 'subtracts');

SKIP: {
    skip 'no network here', 1;
    ok(0, 'fetches remote');
}

TODO: {
    local $TODO = 'rounding not implemented';
    is(sprintf('%d', 2.5), 3, 'rounds');
}

subtest 'mul' => sub {
    plan tests => 3;
    is(1 * 1, 1, 'mul(1, 1) = 1');
    is(2 * 3, 6, 'mul(2, 3) = 6');
    is(2 * 2, 5, 'mul(2, 2) = 5');
};

ok(1, 'top level passes');
ok(lc('A') eq 'a', 'lowercases');
