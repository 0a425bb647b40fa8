"""``fn.io``: file input."""

from . import file  # noqa: F401
