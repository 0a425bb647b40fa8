"""rocAL's images in and out: its decoder (the size cap, TurboJPEG's DCT scaling where Pillow cannot
follow it) and its output tensors (a rule's result in the output type, mean/std normalization, a batch as
one buffer of the operator's largest size). Images are HWC tensors, as rocAL's operators hold them.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import torch
from PIL import Image



# rocAL keeps these extensions (any case) and files with none (rocAL/source/readers/file_source_reader.cpp,
# rocAL/source/meta_data/label_reader_folders.cpp: the text after the last '.', lower-cased)
EXTENSIONS = frozenset({"jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp", "wav"})


def decode(data: bytes, color: str, max_width: int, max_height: int, keep_original: bool = True) -> torch.Tensor:
    """``decoders.image``: HWC uint8 (1 channel for GRAY), as rocAL's TurboJPEG decoder gives it
    (rocAL/source/decoders/image/turbo_jpeg_decoder.cpp, TJDecoder::decode). ``keep_original`` is the
    USER_GIVEN_SIZE_ORIG policy, the decoders' default: an image within ``max_width`` x ``max_height``
    decodes at its size (no EXIF rotation: libjpeg-turbo applies none), a larger JPEG at the largest DCT
    scale M/8 whose size fits (ceil(side * M / 8), aspect kept), e.g. 1200x800 in 1000x1000 at 3/4 ->
    900x600. Without it (USER_GIVEN_SIZE, which ``fn.external_source`` and the inference server's JSON
    pipelines use) tjDecompress2 is given the cap itself and takes the largest of TurboJPEG's scales
    2/1 ... 1/8 that fits, enlarging small JPEGs: 500x375 in 1000x1000 decodes at 2/1, 1000x750.
    rocAL crops an image over 8x the cap; fastload refuses it. rocAL's decoder reads JPEGs only (another
    format fails its header read and the batch's last good image takes its place,
    rocAL/source/loaders/image/image_read_and_decode.cpp; a CMYK JPEG fails its decode, which leaves the
    buffer as it was); fastload decodes those with Pillow at their size and warns, and refuses one larger
    than the cap."""
    from ...decode import MAX_SCANS, _jpeg, count_scans  # _jpeg: None where the C extension is not built
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    within = width <= max_width and height <= max_height
    jpeg = image.format in ("JPEG", "MPO")  # MPO: a camera's JPEG with a second picture appended
    if jpeg and image.info.get("progressive") and count_scans(data) > MAX_SCANS:
        raise ValueError(f"a progressive JPEG with more than {MAX_SCANS} scans (each costs a pass over the "
                         f"whole image; encoders write about 10): refused")
    turbo_reads = jpeg and image.mode != "CMYK"
    if not turbo_reads:
        what = "a CMYK JPEG" if jpeg else f"a {image.format} image"
        warnings.warn(f"{what} in a rocAL pipeline: fastload decodes it with Pillow at its size; rocAL's TurboJPEG "
                      f"decoder cannot (another format: it puts another image of the batch in its place; CMYK: it "
                      f"leaves the image's buffer as it was)", stacklevel=2)
        keep_original = True  # no DCT scaling: at its size, or refused below
    scale = 8 if keep_original and within else _tj_scale(width, height, max_width, max_height)
    if scale == 8:
        pixels = _turbo_rgb(_jpeg, data, image) if color != "GRAY" else None
        if pixels is None:
            if color == "GRAY" and jpeg:
                image.draft("L", image.size)  # libjpeg's own grayscale output, as TurboJPEG's TJPF_GRAY
            pixels = np.array(image.convert("L" if color == "GRAY" else "RGB"))  # a writable copy
    else:
        if not turbo_reads:
            raise ValueError(f"a {width}x{height} {image.format} {image.mode} image is larger than max_decoded_width "
                             f"x max_decoded_height ({max_width}x{max_height}); rocAL's decoder only scales the "
                             f"JPEGs it reads (YCbCr, RGB, gray)")
        if scale is None:
            raise ValueError(f"a {width}x{height} JPEG is over 8x max_decoded_width x max_decoded_height "
                             f"({max_width}x{max_height}): rocAL crops such images, fastload does not")
        require_dct_scaling("decoding a JPEG at rocAL's DCT scale")
        pixels, warning = _turbo(_jpeg, data, scale, -(-width * scale // 8), -(-height * scale // 8),
                                 gray=color == "GRAY")
        if warning is not None:
            raise ValueError(f"corrupt JPEG data ({warning})")
        if color != "GRAY" and pixels.shape[2] == 1:
            pixels = np.repeat(pixels, 3, axis=2)
    tensor = torch.from_numpy(pixels)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(-1)
    return tensor.flip(-1).contiguous() if color == "BGR" else tensor


def require_dct_scaling(what: str) -> None:
    """Refuse ``what`` (at once, where a pipeline is built) where fastload's C extension is missing: DCT
    scaling, which TurboJPEG's size rule needs for most JPEGs under USER_GIVEN_SIZE, is only there."""
    from ...decode import _jpeg
    if _jpeg is None:
        raise RuntimeError(f"{what} needs fastload's C extension (fastload._jpeg, libjpeg-turbo), which is not "
                           f"built here: rocAL's decoder scales JPEGs in the DCT, Pillow cannot (install "
                           f"libjpeg-turbo's headers and reinstall fastload)")


def _tj_scale(width: int, height: int, max_width: int, max_height: int) -> int | None:
    """The M of the first of TurboJPEG's scaling factors, M/8 from 16/8 down to 1/8 (tjGetScalingFactors),
    whose TJSCALED size, ceil(side * M / 8), fits ``max_width`` x ``max_height``; None if none does."""
    return next((m for m in range(16, 0, -1) if -(-width * m // 8) <= max_width
                 and -(-height * m // 8) <= max_height), None)


def _turbo(jpeg, data: bytes, scale: int, width: int, height: int, gray: bool = False
           ) -> tuple[np.ndarray, str | None]:
    """A JPEG decoded whole at DCT scale ``scale``/8 (``width`` x ``height``) by fastload's libjpeg-turbo
    binding into a fresh array: (height, width, channels), and libjpeg's first warning or None. ``gray``:
    libjpeg's grayscale output (a YCbCr JPEG's Y), as TurboJPEG's TJPF_GRAY."""
    buffer = np.empty(width * height * 3, np.uint8)
    got_w, got_h, channels, warnings_seen, warning = jpeg.decode(data, buffer, scale, 0, 0, width, height, gray)
    return buffer[:got_w * got_h * channels].reshape(got_h, got_w, channels), warning if warnings_seen else None


def _turbo_rgb(jpeg, data: bytes, image) -> np.ndarray | None:
    """A three-component JPEG decoded whole by fastload's libjpeg-turbo binding, straight into the array
    returned (Pillow's decode and its copies cost a serving request about 0.8 ms of 3 at 500x375): the
    same pixels (both are libjpeg-turbo with the accurate integer IDCT, as rocAL's TurboJPEG call asks).
    None where Pillow decodes it instead: another format or colour space, or data libjpeg warns about
    (Pillow's decode of those is what rocAL's decoder has always been compared with here)."""
    if jpeg is None or image.format not in ("JPEG", "MPO") or image.mode != "RGB":
        return None
    width, height = image.size
    try:
        pixels, warning = _turbo(jpeg, data, 8, width, height)
    except (ValueError, NotImplementedError):
        return None
    return pixels if warning is None and pixels.shape == (height, width, 3) else None


def per_channel(values, channels: int) -> list[float]:
    """rocAL's mean/std lists for ``channels`` channels: one value for all, else the first ``channels``."""
    values = [float(v) for v in values]
    return values * channels if len(values) == 1 else values[:channels]


def normalize(image: torch.Tensor, mean, std, mirror, dtype: torch.dtype) -> torch.Tensor:
    """crop_mirror_normalize's arithmetic on an HWC image: mirrored where ``mirror``, then (x - mean) / std
    on 0-255 pixels, in ``dtype`` (uint8 rounded and saturated)."""
    channels = image.shape[2]
    mean, std = torch.tensor(per_channel(mean, channels)), torch.tensor(per_channel(std, channels))
    if bool((std == 0).any()):
        raise ValueError("crop_mirror_normalize: a std of 0")
    if mirror:
        image = image.flip(1)
    return as_output((image.float() - mean) / std, dtype)


def as_output(image: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An operator's result in its output_dtype: floats as they are, uint8 rounded and saturated."""
    if image.dtype == dtype:
        return image
    if dtype == torch.uint8:
        return image.float().round().clamp(0, 255).to(torch.uint8)
    return image.to(dtype)


def pad_batch(samples: list[torch.Tensor], buffer_hw: tuple[int, int], layout: str) -> torch.Tensor:
    """A batch as rocAL hands it: one buffer of the operator's maximum size with each sample's image at its
    top left, zeros elsewhere (rocAL/source/pipeline/tensor.cpp: a dense buffer, per-sample ROIs); NHWC or
    NCHW."""
    height = max([buffer_hw[0]] + [s.shape[0] for s in samples])
    width = max([buffer_hw[1]] + [s.shape[1] for s in samples])
    channels = samples[0].shape[2]
    out = torch.zeros((len(samples), height, width, channels), dtype=samples[0].dtype)
    for row, sample in enumerate(samples):
        out[row, :sample.shape[0], :sample.shape[1]] = sample
    return out.permute(0, 3, 1, 2).contiguous() if layout == "NCHW" else out
