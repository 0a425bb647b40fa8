"""fastload.gpu_nvimgcodec on the CPU: nvImageCodec's Python API played by a stand-in (``nvidia.nvimgcodec`` in
sys.modules) that decodes with Pillow, so the plumbing -- backends and parameters asked for, batching, region
decode, None per failed image and the CPU fallback, DLPack hand-over, the choice by name -- is checked here;
tests/gpu/test_nvimgcodec_cuda.py runs the real library on a GPU."""

import io
import sys
import types

import numpy as np
import pytest
import torch
from PIL import Image

import fastload
from fastload import gpu_decode, gpu_nvimgcodec
from fastload import paths as paths_module
from fastload.errors import DecodeError
from fastload.gpu_nvimgcodec import NvImageCodecDecoder, region_pays
from fastload.options import Options

from conftest import decode_on_cpu, make_image, write_folder


# ---------------------------------------------------------------- the stand-in

class _BackendKind:
    CPU_ONLY, GPU_ONLY, HYBRID_CPU_GPU, HW_GPU_ONLY = 1, 2, 3, 4


class _ColorSpec:
    UNCHANGED, RGB, GRAY = 0, 1, 2


class _Backend:
    def __init__(self, backend_kind, load_hint=1.0):
        self.backend_kind, self.load_hint = backend_kind, load_hint


class _DecodeParams:
    def __init__(self, apply_exif_orientation=True, color_spec=_ColorSpec.RGB, allow_any_depth=False):
        self.apply_exif_orientation, self.color_spec = apply_exif_orientation, color_spec


class _Region:
    def __init__(self, start_y, start_x, end_y, end_x):
        self.box = (start_y, start_x, end_y, end_x)


class _CodeStream:
    def __init__(self, data, region=None):
        if isinstance(data, np.ndarray):
            assert data.dtype == np.uint8 and data.ndim == 1
        self.data, self.region = bytes(data), region

    def get_sub_code_stream(self, image_idx=0, region=None):
        return _CodeStream(self.data, region)


class _Image:
    """An nvimgcodec.Image: HWC uint8 that torch takes through DLPack."""

    def __init__(self, pixels: torch.Tensor):
        self.pixels, self.dlpack_calls = pixels, 0
        self.shape = tuple(pixels.shape)

    def __dlpack__(self, **kwargs):
        self.dlpack_calls += 1
        return self.pixels.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.pixels.__dlpack_device__()


class _Decoder:
    made: list = []

    def __init__(self, device_id=-1, max_num_cpu_threads=0, backends=None, options=""):
        self.device_id, self.threads, self.backends, self.options = device_id, max_num_cpu_threads, backends, options
        self.calls = []
        _Decoder.made.append(self)

    def decode(self, srcs, *, images=None, params=None, cuda_stream=0):
        self.calls.append((len(srcs), [s.region.box if s.region else None for s in srcs], cuda_stream, params))
        kinds = {b.backend_kind for b in self.backends or []}
        out = []
        for src in srcs:
            if kinds == {_BackendKind.HW_GPU_ONLY} and b"\xff\xc2" in src.data[:65536]:
                out.append(None)  # the hardware engines do not decode progressive JPEGs
                continue
            try:
                with Image.open(io.BytesIO(src.data)) as image:
                    pixels = np.array(image.convert("RGB"))
            except Exception:
                out.append(None)  # nvImageCodec: None where an image could not be decoded
                continue
            if src.region is not None:
                top, left, bottom, right = src.region.box
                pixels = pixels[top:bottom, left:right]
            out.append(_Image(torch.from_numpy(np.ascontiguousarray(pixels))))
        return out


@pytest.fixture
def nvimgcodec(monkeypatch):
    """The stand-in module, as ``nvidia.nvimgcodec``."""
    fake = types.ModuleType("nvidia.nvimgcodec")
    fake.BackendKind, fake.Backend, fake.ColorSpec = _BackendKind, _Backend, _ColorSpec
    fake.DecodeParams, fake.Region, fake.CodeStream, fake.Decoder = _DecodeParams, _Region, _CodeStream, _Decoder
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", fake)
    _Decoder.made = []
    return fake


def decoder(name="nvimgcodec", **options):
    return NvImageCodecDecoder("cpu", name, probe=lambda device: None, **options)


def jpeg(width=96, height=64, seed=0, **save) -> bytes:
    out = io.BytesIO()
    make_image(seed, width, height).save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def as_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


# ---------------------------------------------------------------- the backend

def test_a_batch_is_one_call_with_dalis_backends_and_torchvisions_pixels(nvimgcodec):
    files = [jpeg(96, 64, 1), jpeg(40, 50, 2), jpeg(33, 17, 3, subsampling=0)]
    backend = decoder()
    images = backend.decode_many([as_tensor(f) for f in files])
    for data, image in zip(files, images):
        assert image.dtype == torch.uint8 and image.shape[0] == 3
        assert torch.equal(image, decode_on_cpu(0, "x.jpg", data))  # the stand-in decodes with libjpeg too
    backend.decode_many([as_tensor(files[0])])
    [made] = _Decoder.made  # one nvImageCodec decoder per instance, made at first use
    assert [call[0] for call in made.calls] == [3, 1]
    kinds = [(b.backend_kind, b.load_hint) for b in made.backends]
    assert kinds == [(_BackendKind.HW_GPU_ONLY, gpu_nvimgcodec.HW_LOAD), (_BackendKind.GPU_ONLY, 1.0),
                     (_BackendKind.HYBRID_CPU_GPU, 1.0)]
    assert "fancy_upsampling=1" in made.options
    params = made.calls[0][3]
    assert params.apply_exif_orientation is False and params.color_spec == _ColorSpec.RGB
    assert made.calls[0][2] == 0  # no CUDA stream off the GPU (tests/gpu checks the loader's stream is passed)


def test_images_come_over_through_dlpack_without_a_copy(nvimgcodec, monkeypatch):
    handed = []
    original = _Decoder.decode

    def keep(self, srcs, **kwargs):
        handed.extend(original(self, srcs, **kwargs))
        return handed[-len(srcs):]
    monkeypatch.setattr(_Decoder, "decode", keep)
    [image] = decoder().decode_many([as_tensor(jpeg(30, 20))])
    assert handed[0].dlpack_calls == 1
    assert image.data_ptr() == handed[0].pixels.data_ptr()  # a (3, H, W) view of the HWC image
    assert image.shape == (3, 20, 30) and image.stride() == (1, 90, 3)


def test_the_three_configurations(nvimgcodec):
    progressive, cmyk = jpeg(64, 64, progressive=True), io.BytesIO()
    Image.new("CMYK", (32, 32), (10, 20, 30, 40)).save(cmyk, "JPEG")
    png = io.BytesIO()
    make_image(0, 16, 16).save(png, "PNG")
    mixed, hw, hybrid = decoder(), decoder("nvimgcodec-hw"), decoder("nvimgcodec-hybrid")
    assert mixed.accepts(jpeg()) and mixed.accepts(progressive) and hybrid.accepts(progressive)
    assert hw.accepts(jpeg()) and not hw.accepts(progressive)  # refused up front: decoded in the reader threads
    for backend in (mixed, hw, hybrid):
        assert not backend.accepts(cmyk.getvalue()) and not backend.accepts(png.getvalue())
    hw.decode_many([as_tensor(jpeg())])
    hybrid.decode_many([as_tensor(jpeg())])
    assert [[b.backend_kind for b in d.backends] for d in _Decoder.made] == [[_BackendKind.HW_GPU_ONLY],
                                                                             [_BackendKind.HYBRID_CPU_GPU]]
    assert {mixed.description, hw.description, hybrid.description} == {
        "nvimgcodec (hardware + cuda)", "nvimgcodec (hardware)", "nvimgcodec (hybrid cpu+gpu)"}
    clone = hw.clone()
    assert clone.name == "nvimgcodec-hw" and clone._decoder is None  # its own nvImageCodec decoder
    with pytest.raises(ValueError, match="nvimgcodec-hw"):
        NvImageCodecDecoder("cpu", "nvimgcodec-fast")


def test_region_decode(nvimgcodec):
    data = jpeg(300, 280)
    backend = decoder()
    whole, window = backend.decode_many([as_tensor(data), as_tensor(data)], [None, (10, 20, 110, 90)])
    assert window.shape == (3, 70, 100)
    assert torch.equal(window, whole[:, 20:90, 10:110])
    assert _Decoder.made[0].calls[0][1] == [None, (20, 10, 90, 110)]  # Region(start_y, start_x, end_y, end_x)


def test_when_region_decode_pays():
    assert region_pays((0, 0, 200, 150), 400, 300)  # a quarter of a large image
    assert not region_pays((0, 0, 300, 250), 400, 300)  # more than half: the whole image
    assert not region_pays((0, 0, 50, 50), 200, 200)  # an image under 256x256: the whole image
    assert not region_pays((-1, 0, 50, 50), 400, 400) and not region_pays(None, 400, 400)


def test_a_failed_image_alone_goes_to_the_cpu_and_an_unreadable_one_is_named(nvimgcodec):
    good, broken = jpeg(64, 48, 1), jpeg(64, 48, 2)[:300]  # cut short: the stand-in gives None
    items = [(0, "a.jpg", good), (1, "b.jpg", broken), (2, "c.jpg", jpeg(20, 20, 3))]
    fallback_calls = []

    def fallback(i):
        fallback_calls.append(i)
        return decode_on_cpu(*items[i])
    results = gpu_decode.decode_batch(items, decoder(), fallback)
    assert fallback_calls == [1]  # only the image nvImageCodec gave None for
    assert isinstance(results[1], DecodeError) and results[1].path == "b.jpg"
    assert torch.equal(results[0], decode_on_cpu(*items[0])) and results[2].shape == (3, 20, 20)


def test_chosen_by_name_and_refused_saying_why(nvimgcodec, monkeypatch):
    for name in ("nvimgcodec", "nvimgcodec-hw", "nvimgcodec-hybrid"):
        assert name in gpu_decode.DECODER_NAMES
        Options(decoder=name)  # a valid value
    monkeypatch.delitem(sys.modules, "nvidia.nvimgcodec")
    monkeypatch.setitem(sys.modules, "nvidia", None)  # not installed, even where it is
    with pytest.raises(RuntimeError, match="decoder='nvimgcodec-hw' is not available here: nvImageCodec is not"):
        gpu_decode.choose_decoder("cuda", "cpu", decoder="nvimgcodec-hw")
    # decoder="auto": an uninstalled nvImageCodec is one more candidate that is not there
    reasons = {b.description: b.unavailable() for b in (make("cuda") for make in gpu_decode.GPU_BACKENDS)}
    assert "nvImageCodec is not installed" in reasons["nvimgcodec (hardware + cuda)"]


# ---------------------------------------------------------------- through the device path

@pytest.fixture
def large_folder(tmp_path_factory):
    """Images large enough that RandomResizedCrop's small windows are region-decoded."""
    sizes = [[(320, 290), (96, 80)], [(300, 280), (64, 64)]]
    return write_folder(tmp_path_factory.mktemp("large"), sizes)


def small_windows():
    """RandomResizedCrop's small windows (4-12% of the image: region-decoded on the large images) to 24x24,
    uint8: little for Triton's interpreter to resample."""
    T = fastload.transforms
    return T.Compose([T.RandomResizedCrop(24, scale=(0.04, 0.12)), T.RandomHorizontalFlip(), T.ToImage()])


def test_the_device_path_on_nvimgcodec_matches_the_cpu_path(large_folder, nvimgcodec, kernel_on_cpu):
    backend = decoder()
    dataset = fastload.ImageFolder(str(large_folder), transform=small_windows())
    options = dict(batch_size=2, num_workers=2, seed=3, shuffle=True)
    loader = fastload.DataLoader(dataset, device="cpu", decoder=backend, **options)
    got = list(loader)
    assert loader.stats.decoder == "nvimgcodec (hardware + cuda)"
    assert loader.path.parallel and loader.path.lanes == 2 and loader.path.balance is None  # forced: no balance
    regions = [r for made in _Decoder.made for call in made.calls for r in call[1]]
    assert len(regions) == len(dataset) and any(r is not None for r in regions)  # some windows decoded alone
    assert len(_Decoder.made) >= 1
    expected = list(fastload.DataLoader(dataset, dct_scaling=False, **options))
    for (images, labels), (cpu_images, cpu_labels) in zip(got, expected, strict=True):
        assert torch.equal(labels, cpu_labels)
        assert (images.float() - cpu_images.float()).abs().max() <= 1  # the kernel's rounding against Pillow's


def test_chosen_by_the_loader_it_is_balanced_with_the_cpu(large_folder, nvimgcodec, kernel_on_cpu, monkeypatch):
    backend = decoder()
    monkeypatch.setattr(paths_module, "choose_decoder", lambda *args, **kwargs: [backend])
    dataset = fastload.ImageFolder(str(large_folder), transform=small_windows())
    loader = fastload.DataLoader(dataset, batch_size=2, num_workers=2, device="cpu")
    loader.path._choose()
    loader.path.balance.share = 0.5  # from the start: half of the images to each side
    assert len(list(loader)) == 2
    balance = loader.path.balance
    assert balance.batches == 2 and balance.gpu_rate and balance.cpu_seconds
    gpu_decoded = sum(len(call[1]) for made in _Decoder.made for call in made.calls)
    assert 0 < gpu_decoded < len(dataset)  # the CPU took its share
