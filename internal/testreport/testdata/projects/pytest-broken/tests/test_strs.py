def test_strip():
    assert " a ".strip() == "a"


def test_split():
    assert "a,b".split(",") == ["a", "b"]
