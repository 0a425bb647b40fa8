"""DALI's legacy ``ops`` API: operator objects made with arguments and called with inputs (and more
arguments), each the ``fn`` function of the same operator."""

from __future__ import annotations

from .. import detection, geometry, operators


def legacy(name: str, function, positional: tuple[str, ...] = ()):
    """A DALI ``ops`` class: ``name(**args)(*inputs, **more_args)`` is ``function(*inputs, **args, **more_args)``
    (``positional``: the constructor arguments DALI also takes by position, ExternalSource's source)."""
    def __init__(self, *args, **kwargs):
        if len(args) > len(positional):
            raise TypeError(f"ops.{name} takes at most {len(positional)} positional arguments")
        self._args = {**dict(zip(positional, args)), **kwargs}

    def __call__(self, *inputs, **args):
        return function(*inputs, **{**self._args, **args})

    return type(name, (), {"__init__": __init__, "__call__": __call__,
                           "__doc__": f"DALI's ops.{name}: see {function.__module__}.{function.__name__}.",
                           "__module__": __name__})


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

from . import decoders, random, readers  # noqa: E402,F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops")  # any other name: NotImplementedError naming it
