"""``fn.io``: file input."""

from . import file  # noqa: F401

from ...unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.io")  # any other name: NotImplementedError naming it
