"""What the ``fastload`` subcommands share: opening a dataset argument, the recipe option, the device option.

Its own module so that the subcommands import it and the package (which imports the subcommands to build
the parser) imports none of them back.
"""

from __future__ import annotations

import argparse
import os

from ..recipes import RECIPES


def open_source(data: str, transform=None, **options):
    """A folder becomes a fastload.ImageFolder, a file a fastload.FileList; tar shards (``.tar`` paths,
    brace patterns, globs or URLs) fastload.TarShards, and ``.tfrecord`` files fastload.TFRecords."""
    from .. import FileList, ImageFolder, TarShards, TFRecords
    if ".tar" in os.path.basename(data) and not os.path.isdir(data):
        try:
            return TarShards(data, transform, **options)
        except (OSError, ValueError, NotImplementedError) as error:
            raise SystemExit(f"fastload: {data}: {error}") from None
    if "tfrecord" in os.path.basename(data).lower() and not os.path.isdir(data):
        try:
            return TFRecords(data, transform=transform, **options)
        except (OSError, ValueError) as error:
            raise SystemExit(f"fastload: {data}: {error}") from None
    if os.path.isdir(data):
        return ImageFolder(data, transform, **options)
    if os.path.isfile(data):
        try:
            return FileList(data, transform=transform, **options)
        except (ValueError, UnicodeDecodeError) as error:
            raise SystemExit(f"fastload: {data}: not an image folder, and not a file list of 'path label' "
                             f"lines ({error})") from None
    raise SystemExit(f"fastload: {data}: no such folder or file list")


def parse_device(name: str) -> str:
    import torch
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("fastload: --device cuda was asked for, but torch sees no CUDA device")
    return name


def add_recipe_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--transform", default=default, choices=sorted(RECIPES),
                        help=f"a built-in recipe (default: {default})")
