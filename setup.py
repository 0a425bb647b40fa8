"""fastload packaging (distribution ``torch-fastload``, import name and command ``fastload``).

kernels/ is installed as the subpackage fastload.kernels.

Dependencies are ranges that leave the user's torch where it is: torch and
torchvision from the oldest release the code supports (2.11 / 0.26; CI
tests it) up, numpy and Pillow as they come. Nothing here is pinned: a user
with a site or container torch keeps it. Triton is not a dependency: the
CPU path never needs it, and where there is a GPU the torch wheel brings it.

Two small optional C extensions speed up the CPU path: fastload._jpeg
(region-of-interest JPEG decoding against the system's libjpeg-turbo;
Debian: libjpeg62-turbo-dev) and fastload._normalize (one-pass per-sample
normalization). They build where a compiler (and, for _jpeg, the libjpeg
headers) is present; if they do not build, installation goes on and Pillow
and torch do that work, only slower.
"""

import pathlib
import re

from setuptools import Extension, find_packages, setup

HERE = pathlib.Path(__file__).parent
_meta = (HERE / "fastload" / "_version.py").read_text()
NAME = re.search(r'DISTRIBUTION = "([^"]+)"', _meta).group(1)
VERSION = re.search(r'__version__ = "([^"]+)"', _meta).group(1)

setup(
    name=NAME,
    version=VERSION,
    description="A drop-in, thread-based torch DataLoader for image training: fused decode and augmentation",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    classifiers=["Programming Language :: Python :: 3", "License :: OSI Approved :: Apache Software License",
                 "Operating System :: POSIX :: Linux", "Topic :: Scientific/Engineering :: Artificial Intelligence",
                 "Intended Audience :: Science/Research"],
    packages=[*find_packages(include=["fastload", "fastload.*"]), "fastload.kernels"],
    package_dir={"fastload": "fastload", "fastload.kernels": "kernels"},
    package_data={"fastload": ["serve_openapi.json"]},  # (fastload serve's OpenAPI description, GET /v2/openapi.json)
    ext_modules=[Extension("fastload._jpeg", ["fastload/_jpeg.c"],
                           depends=["fastload/_resample.h", "fastload/_lookup.h"], libraries=["jpeg"],
                           extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
                 Extension("fastload._normalize", ["fastload/_normalize.c"], depends=["fastload/_lookup.h"],
                           extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
                 *[Extension(f"fastload.compat.dali.{name}", [f"fastload/compat/dali/{name}.c"],
                             extra_compile_args=["-O3", "-ffp-contract=off"], optional=True)
                   for name in ("_native", "_native_warp", "_native_effects")]],
    # tqdm: the progress bars of `fastload bench` and `inspect`;
    # fsspec (with aiohttp for http/https): remote shards, through the storage library the field uses;
    # google-crc32c: TFRecords' CRC32-C (zlib has only CRC-32), Google's C library behind its storage clients
    install_requires=["torch>=2.11", "torchvision>=0.26", "numpy", "pillow", "tqdm", "fsspec[http]>=2024.6",
                      "google-crc32c>=1.5"],
    extras_require={
        "plot": ["matplotlib"],
        # S3 and GCS shards through fsspec
        "s3": ["s3fs>=2023.1"], "gcs": ["gcsfs>=2023.1"],
        # TorchCodec's nvJPEG decoder, measured against torchvision's on the first batch. Each TorchCodec
        # release is built for one torch release: install the one made for yours
        "torchcodec": ["torchcodec"],
        # nvImageCodec (decoder="nvimgcodec"): the GPU's hardware JPEG engines (A100, H100, H200), CUDA nvJPEG and
        # the hybrid CPU+GPU decoder, as DALI uses them. The build for your torch's CUDA major version, with
        # libnvjpeg (its [nvjpeg] extra); a torch built for CUDA 12 takes -cu12, one for CUDA 13 -cu13
        "nvimgcodec-cu12": ["nvidia-nvimgcodec-cu12[nvjpeg]>=0.6"],
        "nvimgcodec-cu13": ["nvidia-nvimgcodec-cu13[nvjpeg]>=0.6"],
        # PyAV (FFmpeg, bundled in its wheels): fastload.compat.rocal's fn.readers.video decodes sequences as
        # rocAL's FFmpeg decoder does (TorchCodec needs a system FFmpeg)
        "video": ["av>=14"],
        # py-lmdb (LMDB bundled in its wheels): fastload.compat.rocal's fn.readers.caffe / caffe2
        "lmdb": ["lmdb>=1.4"],
        # soundfile (libsndfile, bundled in its wheels): fastload.compat.rocal's fn.decoders.audio
        "audio": ["soundfile>=0.12"],
        # fastload serve runs on aiohttp, which fsspec[http] (a runtime requirement) already installs: this
        # extra only names it, with the oldest release whose server limits and shutdown fastload uses
        "serve": ["aiohttp>=3.9"],
        # fastload serve --grpc-port: tritonclient[grpc] carries the protocol's generated stubs (service_pb2,
        # service_pb2_grpc: nothing to compile here) and installs grpcio, whose grpc.aio server runs on the HTTP
        # server's event loop
        "grpc": ["tritonclient[grpc]>=2.40"],
        # What the test suite needs besides the runtime (contributors; pinned where a release changes results):
        # pytest-xdist: the suite runs in 2 processes (-n 2);
        # triton: the fused kernel's tests run in its interpreter (TRITON_INTERPRET=1), also beside a CPU torch;
        # lightning and accelerate: tests/test_frameworks.py runs the loader under both;
        # nvidia-dali-cuda130: tests/compat compares fastload.compat.dali with real DALI 2.4's CPU operators;
        # av, lmdb, soundfile: the rocAL video, Caffe and audio tests write their inputs with them;
        # webdataset: benchmarks/bench_shards.py runs its loader beside fastload's, tiny in test_benchmarks.py;
        # moto[server] + s3fs: tests/test_shardfiles.py reads shards from a real S3-compatible endpoint on
        # 127.0.0.1 (moto's server mode, as s3fs's own tests do); s3fs pinned to the fsspec release it is made
        # with (unpinned, pip backtracks to s3fs 0.4, which cannot take an endpoint)
        # tritonclient[http] and [grpc]: tests/test_serving_protocol.py and test_serve_grpc.py drive fastload serve
        # with Triton's own clients
        # ruff: .ci/run lints the tree with the configuration in pyproject.toml (pinned: a release adds rules)
        # hypothesis: property-based tests of the parsers, the loader's state and the order's invariants;
        # schemathesis: the REST server fuzzed from its OpenAPI description; atheris: the coverage-guided fuzz
        # targets of the native and byte-level parsers (wheels for x86_64 Linux only; its tests skip elsewhere);
        # torchdata: its StatefulDataLoader is the reference the resume of stateful samplers and datasets is
        # compared with
        # mkdocs, mkdocs-material, mkdocstrings[python]: tests/test_docs_site.py builds the documentation site
        # (mkdocs.yml: the guides and the API reference from the docstrings) in strict mode
        # torchcodec is left out: each release needs its own torch, and its tests skip without it
        "test": ["ruff==0.17.6", "pytest", "pytest-timeout", "pytest-xdist>=3.6", "matplotlib",
                 "triton; platform_system == 'Linux'", "lightning>=2.5", "accelerate>=1.10",
                 "nvidia-dali-cuda130==2.4.0", "webdataset>=1.0.2",
                 "moto[server]==5.2.5", "s3fs==2026.9.0", "fsspec==2026.9.0", "av>=14", "lmdb>=1.4", "soundfile>=0.12",
                 "tritonclient[http,grpc]>=2.40", "hypothesis>=6.100", "schemathesis>=4.0", "torchdata>=0.8",
                 "atheris>=2.3; platform_system == 'Linux' and platform_machine == 'x86_64'",
                 "mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"],
    },
    entry_points={"console_scripts": ["fastload = fastload.cli:main"]},
)
