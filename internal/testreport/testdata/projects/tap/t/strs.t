use strict;
use warnings;
use Test::More;

is(uc('a'), 'A', 'upper');
is(join(',', split(/,/, 'a,b')), 'a,b', 'split');
done_testing();
