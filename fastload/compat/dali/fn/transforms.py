"""``fn.transforms``: 2x3 affine matrices for 2-D points (see ``affine``)."""

from ..affine import combine, rotation, scale, shear, translation  # noqa: F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.transforms")  # any other name: NotImplementedError naming it
