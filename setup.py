"""fastload packaging: kernels/ is installed as the subpackage fastload.kernels.

Two small optional C extensions speed up the CPU path: fastload._jpeg
(region-of-interest JPEG decoding against the system's libjpeg-turbo; Debian:
libjpeg62-turbo-dev, which the pillow-simd build needs anyway) and
fastload._normalize (one-pass per-sample normalization). If they do not
build, installation goes on and Pillow and torch do that work, only slower.
"""

from setuptools import Extension, find_packages, setup

setup(
    name="fastload",
    version="0.1.0",
    description="A drop-in, thread-based torch DataLoader for image training",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=[*find_packages(include=["fastload", "fastload.*"]), "fastload.kernels"],
    package_dir={"fastload": "fastload", "fastload.kernels": "kernels"},
    ext_modules=[Extension("fastload._jpeg", ["fastload/_jpeg.c"], libraries=["jpeg"],
                           extra_compile_args=["-O2"], optional=True),
                 Extension("fastload._normalize", ["fastload/_normalize.c"],
                           extra_compile_args=["-O3", "-ffp-contract=off"], optional=True)],
    # fsspec (with aiohttp for http/https): TarShards' remote shards, the storage library the field uses;
    # google-crc32c: TFRecords' CRC32-C (zlib has only CRC-32), Google's C library behind its storage clients
    install_requires=["torch==2.14.1", "torchvision==0.29.1", "numpy", "pillow", "tqdm", "fsspec[http]>=2024.6",
                      "google-crc32c>=1.5"],
    extras_require={"plot": ["matplotlib"],
                    # S3 and GCS shards through fsspec
                    "s3": ["s3fs"], "gcs": ["gcsfs"],
                    # TorchCodec's nvJPEG decoder, measured against torchvision's on the first batch
                    "torchcodec": ["torchcodec==0.17.0"],
                    # PyAV (FFmpeg, bundled in its wheels): fastload.compat.rocal's fn.readers.video decodes
                    # sequences as rocAL's FFmpeg decoder does (TorchCodec needs a system FFmpeg)
                    "video": ["av==18.1.0"],
                    # py-lmdb (LMDB bundled in its wheels): fastload.compat.rocal's fn.readers.caffe / caffe2
                    # read Caffe and Caffe2 LMDB databases
                    "lmdb": ["lmdb==3.0.0"],
                    # soundfile (libsndfile, bundled in its wheels): fastload.compat.rocal's fn.decoders.audio
                    # reads audio with the library rocAL's decoder calls
                    "audio": ["soundfile==0.14.0"],
                    # pytest-xdist: the suite runs in 2 processes (-n 2), about 16 minutes instead of 24 on 2 cores
                    # (most tests use one core; the multi-process ones overlap with the rest)
                    # lightning and accelerate: tests/test_frameworks.py runs the loader under both;
                    # torchcodec: tests/test_decode.py calls its decoder (on the CPU) as the GPU path does
                    # nvidia-dali-cuda130: tests/compat compares fastload.compat.dali with real DALI's CPU
                    # operators (they run without a GPU)
                    # av: tests/compat/test_rocal_video.py writes and reads videos; lmdb: test_rocal_caffe.py writes
                    # LMDBs; soundfile: test_rocal_audio.py writes WAVs
                    # webdataset: benchmarks/bench_shards.py runs its loader beside fastload's (issue 18), tiny in
                    # tests/test_benchmarks.py
                    # moto[server] + s3fs: tests/test_shardfiles.py reads shards from a real S3-compatible
                    # endpoint on 127.0.0.1 (moto's server mode, as s3fs's own tests do); s3fs pinned to the
                    # fsspec release it is made with
                    "test": ["pytest", "pytest-timeout", "pytest-xdist==3.8.0", "matplotlib", "lightning==2.6.6", "accelerate==1.15.0",
                             "torchcodec==0.17.0", "nvidia-dali-cuda130==2.4.0", "webdataset==1.0.2",
                             "moto[server]==5.2.5", "s3fs==2026.9.0", "fsspec==2026.9.0", "av==18.1.0",
                             "lmdb==3.0.0", "soundfile==0.14.0"]},
    entry_points={"console_scripts": ["fastload = fastload.cli:main"]},
)
