"""``ops.decoders``."""

from .. import detection, operators
from ._classes import legacy as _legacy

Image = _legacy("Image", operators.decoders_image)
ImageRandomCrop = _legacy("ImageRandomCrop", operators.decoders_image_random_crop)
ImageSlice = _legacy("ImageSlice", detection.decoders_image_slice)

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops.decoders")  # any other name: NotImplementedError naming it
