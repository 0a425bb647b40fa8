"""``ops.random``."""

from .. import operators
from ._classes import legacy as _legacy

CoinFlip = _legacy("CoinFlip", operators.random_coin_flip)
Uniform = _legacy("Uniform", operators.random_uniform)

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops.random")  # any other name: NotImplementedError naming it
