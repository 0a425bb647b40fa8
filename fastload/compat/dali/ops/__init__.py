"""DALI's legacy ``ops`` API: operator objects made with arguments and called with inputs (and more
arguments), each the ``fn`` function of the same operator."""

from __future__ import annotations

from .. import detection, effects, geometry, operators
from .classes import legacy


FileReader = legacy("FileReader", operators.readers_file)
ImageDecoder = legacy("ImageDecoder", operators.decoders_image)
nvJPEGDecoder = legacy("nvJPEGDecoder", operators.decoders_image)
ImageDecoderRandomCrop = legacy("ImageDecoderRandomCrop", operators.decoders_image_random_crop)
nvJPEGDecoderRandomCrop = legacy("nvJPEGDecoderRandomCrop", operators.decoders_image_random_crop)
RandomResizedCrop = legacy("RandomResizedCrop", operators.random_resized_crop)
Resize = legacy("Resize", operators.resize)
Crop = legacy("Crop", operators.crop)
CropMirrorNormalize = legacy("CropMirrorNormalize", operators.crop_mirror_normalize)
Flip = legacy("Flip", operators.flip)
Rotate = legacy("Rotate", operators.rotate)
ColorTwist = legacy("ColorTwist", operators.color_twist)
BrightnessContrast = legacy("BrightnessContrast", operators.brightness_contrast)
Hsv = legacy("Hsv", operators.hsv)
Cast = legacy("Cast", operators.cast)
Cat = legacy("Cat", operators.cat)
Stack = legacy("Stack", operators.stack)
CoinFlip = legacy("CoinFlip", operators.random_coin_flip)
Uniform = legacy("Uniform", operators.random_uniform)
ExternalSource = legacy("ExternalSource", operators.external_source, positional=("source", "num_outputs"))
COCOReader = legacy("COCOReader", detection.readers_coco)
ImageDecoderSlice = legacy("ImageDecoderSlice", detection.decoders_image_slice)
RandomBBoxCrop = legacy("RandomBBoxCrop", detection.random_bbox_crop)
BbFlip = legacy("BbFlip", detection.bb_flip)
BoxEncoder = legacy("BoxEncoder", detection.box_encoder)
Paste = legacy("Paste", detection.paste)
BBoxPaste = legacy("BBoxPaste", detection.bbox_paste)
WarpAffine = legacy("WarpAffine", geometry.warp_affine)
Slice = legacy("Slice", geometry.slice)
Pad = legacy("Pad", geometry.pad)
PeekImageShape = legacy("PeekImageShape", geometry.peek_image_shape)
ColorSpaceConversion = legacy("ColorSpaceConversion", geometry.color_space_conversion)
Erase = legacy("Erase", effects.erase)
Water = legacy("Water", effects.water)
Sphere = legacy("Sphere", effects.sphere)
JpegCompressionDistortion = legacy("JpegCompressionDistortion", effects.jpeg_compression_distortion)

from . import decoders, random, readers  # noqa: E402,F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops")  # any other name: NotImplementedError naming it
