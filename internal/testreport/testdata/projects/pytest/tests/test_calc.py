import pytest


def add(a, b):
    return a + b


def test_add():
    assert add(2, 3) == 5


def test_sub():
    assert 5 - 3 == 3


@pytest.mark.parametrize("a,b,want", [(1, 1, 1), (2, 3, 6), (2, 2, 5)])
def test_mul(a, b, want):
    assert a * b == want


@pytest.mark.skip(reason="not on this platform")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known bug")
def test_known_bug():
    assert add(1, 1) == 3


@pytest.fixture
def broken_db():
    raise RuntimeError("database unavailable")


def test_with_db(broken_db):
    assert broken_db


class TestStrings:
    def test_upper(self):
        assert "a".upper() == "A"

    def test_lower(self):
        assert "A".lower() == "b"
