"""``fn.transforms``: affine matrices, 2x3 for 2-D points (``crop``: any dimensionality; see ``affine``)."""

from ..affine import combine, crop, rotation, scale, shear, translation  # noqa: F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.transforms")  # any other name: NotImplementedError naming it
