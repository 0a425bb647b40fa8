"""DALI's ``fn`` API: operators as functions that add to the pipeline being defined (see ``operators``)."""

from ..operators import (brightness_contrast, cast, cat, color_twist, crop, crop_mirror_normalize,  # noqa: F401
                         external_source, flip, hsv, random_resized_crop, resize, rotate, stack)
from ..affine import coord_transform  # noqa: F401
from ..detection import bb_flip, bbox_paste, box_encoder, paste, random_bbox_crop  # noqa: F401
from ..geometry import color_space_conversion, pad, peek_image_shape, slice, warp_affine  # noqa: F401
from ..effects import erase, jpeg_compression_distortion, sphere, water  # noqa: F401
from ..operators import decoders_image as image_decoder  # noqa: F401  (DALI's legacy names)
from ..operators import decoders_image_random_crop as image_decoder_random_crop  # noqa: F401
from ..detection import decoders_image_slice as image_decoder_slice  # noqa: F401
from . import decoders, io, random, readers, transforms  # noqa: F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn")  # any other name: NotImplementedError naming it
