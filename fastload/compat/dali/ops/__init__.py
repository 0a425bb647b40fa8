"""DALI's legacy ``ops`` API: operator objects made with arguments and called with inputs (and more
arguments), each the ``fn`` function of the same operator."""

from __future__ import annotations

from .. import detection, effects, geometry, operators
from ._classes import legacy as _legacy


FileReader = _legacy("FileReader", operators.readers_file)
ImageDecoder = _legacy("ImageDecoder", operators.decoders_image)
nvJPEGDecoder = _legacy("nvJPEGDecoder", operators.decoders_image)
ImageDecoderRandomCrop = _legacy("ImageDecoderRandomCrop", operators.decoders_image_random_crop)
nvJPEGDecoderRandomCrop = _legacy("nvJPEGDecoderRandomCrop", operators.decoders_image_random_crop)
RandomResizedCrop = _legacy("RandomResizedCrop", operators.random_resized_crop)
Resize = _legacy("Resize", operators.resize)
Crop = _legacy("Crop", operators.crop)
CropMirrorNormalize = _legacy("CropMirrorNormalize", operators.crop_mirror_normalize)
Flip = _legacy("Flip", operators.flip)
Rotate = _legacy("Rotate", operators.rotate)
ColorTwist = _legacy("ColorTwist", operators.color_twist)
BrightnessContrast = _legacy("BrightnessContrast", operators.brightness_contrast)
Hsv = _legacy("Hsv", operators.hsv)
Cast = _legacy("Cast", operators.cast)
Cat = _legacy("Cat", operators.cat)
Stack = _legacy("Stack", operators.stack)
CoinFlip = _legacy("CoinFlip", operators.random_coin_flip)
Uniform = _legacy("Uniform", operators.random_uniform)
ExternalSource = _legacy("ExternalSource", operators.external_source, positional=("source", "num_outputs"))
COCOReader = _legacy("COCOReader", detection.readers_coco)
ImageDecoderSlice = _legacy("ImageDecoderSlice", detection.decoders_image_slice)
RandomBBoxCrop = _legacy("RandomBBoxCrop", detection.random_bbox_crop)
BbFlip = _legacy("BbFlip", detection.bb_flip)
BoxEncoder = _legacy("BoxEncoder", detection.box_encoder)
Paste = _legacy("Paste", detection.paste)
BBoxPaste = _legacy("BBoxPaste", detection.bbox_paste)
WarpAffine = _legacy("WarpAffine", geometry.warp_affine)
Slice = _legacy("Slice", geometry.slice)
Pad = _legacy("Pad", geometry.pad)
PeekImageShape = _legacy("PeekImageShape", geometry.peek_image_shape)
ColorSpaceConversion = _legacy("ColorSpaceConversion", geometry.color_space_conversion)
Erase = _legacy("Erase", effects.erase)
Water = _legacy("Water", effects.water)
Sphere = _legacy("Sphere", effects.sphere)
JpegCompressionDistortion = _legacy("JpegCompressionDistortion", effects.jpeg_compression_distortion)

from . import decoders, random, readers  # noqa: E402,F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops")  # any other name: NotImplementedError naming it
