"""``ops.random``."""

from .. import operators
from . import legacy

CoinFlip = legacy("CoinFlip", operators.random_coin_flip)
Uniform = legacy("Uniform", operators.random_uniform)
