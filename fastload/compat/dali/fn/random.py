"""``fn.random``: per-sample random values, drawn from each sample's own stream."""

from ..operators import random_coin_flip as coin_flip  # noqa: F401
from ..operators import random_uniform as uniform  # noqa: F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.random")  # any other name: NotImplementedError naming it
