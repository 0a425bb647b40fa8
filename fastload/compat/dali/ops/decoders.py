"""``ops.decoders``."""

from .. import operators
from . import legacy

Image = legacy("Image", operators.decoders_image)
ImageRandomCrop = legacy("ImageRandomCrop", operators.decoders_image_random_crop)

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops.decoders")  # any other name: NotImplementedError naming it
