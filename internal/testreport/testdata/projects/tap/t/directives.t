use strict;
use warnings;
use Test::More tests => 4;

ok(1, 'plain');

SKIP: {
    skip 'Test::More writes skip in lower case', 1;
    ok(0, 'never runs');
}

TODO: {
    local $TODO = 'a TODO that passes anyway';
    ok(1, 'bonus');
}

TODO: {
    todo_skip 'todo and skip at once', 1;
    ok(0, 'never runs either');
}
