"""``ops.decoders``."""

from .. import operators
from . import legacy

Image = legacy("Image", operators.decoders_image)
ImageRandomCrop = legacy("ImageRandomCrop", operators.decoders_image_random_crop)
