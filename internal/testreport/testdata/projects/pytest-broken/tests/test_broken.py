import not_a_real_module


def test_never_runs():
    assert not_a_real_module
