"""Print what this install of fastload runs with: its version, which C extensions were built, the JPEG
decoders found, torch, torchvision, CUDA and its GPUs, Triton and the optional packages.

Why: without its C extensions fastload still runs, but its CPU path takes the slower Pillow route
(decode, then resize and normalize in Python), which a user only sees as a lower images/s. ``fastload
doctor`` says so, and exits 1 when a core extension is missing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata

# (module, what it does); the first two are the core's: the CPU fast path needs them
EXTENSIONS = (
    ("fastload._jpeg", "libjpeg region decoding and the one-call native sample: the CPU fast path"),
    ("fastload._normalize", "the float output's lookup on the Pillow route"),
    ("fastload.compat.dali._native", "the DALI layer's resize, rounding and normalization"),
    ("fastload.compat.dali._native_warp", "the DALI layer's warps and rotations"),
    ("fastload.compat.dali._native_effects", "the DALI layer's colour maps and effects"),
)
CORE = 2
# (module, distribution, what it adds)
OPTIONAL = (
    ("torchcodec", "torchcodec", "GPU JPEG decoding through TorchCodec"),
    ("nvidia.nvimgcodec", "nvidia-nvimgcodec-cu13 nvidia-nvimgcodec-cu12", "nvImageCodec's hardware JPEG decoders"),
    ("triton", "triton", "the fused augmentation kernel on the GPU"),
    ("nvidia.dali", "nvidia-dali-cuda130", "real DALI, for comparing with fastload.compat.dali"),
    ("fsspec", "fsspec", "shards over HTTP, S3 and GCS"),
    ("s3fs", "s3fs", "S3"),
    ("gcsfs", "gcsfs", "Google Cloud Storage"),
    ("lmdb", "lmdb", "the LMDB (Caffe) readers"),
    ("aiohttp", "aiohttp", "fastload serve"),
    ("grpc", "grpcio", "fastload serve's gRPC endpoint"),
    ("matplotlib", "matplotlib", "fastload bench --plot"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options: it only reports."""


def _version(distributions: str) -> str:
    """The version of the first of the (space-separated) distributions installed."""
    for distribution in distributions.split():
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "installed"


def run(args) -> int:
    from .._version import DISTRIBUTION, __version__
    print(f"fastload {__version__} ({DISTRIBUTION})")
    missing_core = []
    print("\nC extensions:")
    for number, (module, what) in enumerate(EXTENSIONS):
        try:
            importlib.import_module(module)
            state = "built"
        except ImportError as error:
            state = f"MISSING ({error})"
            if number < CORE:
                missing_core.append(module)
        print(f"  {module:<38} {state}: {what}")
    import PIL
    import PIL.features
    import torch
    import torchvision
    print("\nJPEG decoding:")
    turbo = PIL.features.check_feature("libjpeg_turbo")
    print(f"  Pillow {PIL.__version__}, libjpeg-turbo {PIL.features.version('libjpeg_turbo') if turbo else 'no'}")
    print(f"  torchvision {torchvision.__version__}: torchvision.io.decode_jpeg "
          f"{'yes' if hasattr(torchvision.io, 'decode_jpeg') else 'no'}")
    print("\ntorch:")
    print(f"  torch {torch.__version__}, CUDA {torch.version.cuda or 'none (a CPU build)'}, "
          f"{torch.get_num_threads()} intra-op threads")
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            print(f"  cuda:{index} {torch.cuda.get_device_name(index)}")
    else:
        print("  no CUDA device visible: device='cuda' is refused (docs/gpu.md)")
    print("\noptional packages:")
    for module, distribution, what in OPTIONAL:
        try:
            importlib.import_module(module)
            state = _version(distribution)
        except Exception:  # an installed package can fail to import for reasons of its own (a CUDA mismatch)
            state = "-"
        print(f"  {module:<20} {state:<14} {what}")
    if missing_core:
        print(f"\nfastload doctor: {', '.join(missing_core)} not built: the CPU path takes the slower Pillow "
              f"route. Install a C compiler and the libjpeg headers (Debian/Ubuntu: apt install gcc "
              f"libjpeg-dev), then reinstall fastload from source (docs/install.md).")
        return 1
    return 0
