import does_not_exist  # noqa: F401


class Nothing:
    pass
