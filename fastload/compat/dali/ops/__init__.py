"""DALI's legacy ``ops`` API: operator objects made with arguments and called with inputs (and more
arguments), each the ``fn`` function of the same operator.

Every class here and in the sub-modules (``ops.decoders``, ``ops.readers``, ``ops.random``...) is made by
``spec.install`` from the operators' declarations, DALI's deprecated names (``ops.ImageDecoder``,
``ops.CoinFlip``, ``ops.FileReader``) and older releases' (``ops.nvJPEGDecoder``) with them.
"""

from .. import fn  # noqa: F401  (imports the declaring modules)
from .. import spec as _spec
from ..unsupported import refuse

_spec.install(_spec.OPS)

__getattr__ = refuse(__name__, "ops", _spec.nearby("ops"), _spec.REFUSED)  # any other name: refused, named
