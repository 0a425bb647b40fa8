"""``fn.decoders``: image decoding, whole, a random crop window, or a given slice."""

from ..detection import decoders_image_slice as image_slice  # noqa: F401
from ..operators import decoders_image as image  # noqa: F401
from ..operators import decoders_image_random_crop as image_random_crop  # noqa: F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.decoders")  # any other name: NotImplementedError naming it
