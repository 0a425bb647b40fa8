"""The ``fastload`` command: bench, preview and inspect a dataset; pack it into tar shards; run a JSON
preprocessing pipeline, or serve a classifier behind one (also ``python -m fastload``)."""

from __future__ import annotations

import argparse
import os
import sys

import torch

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
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("fastload: --device cuda was asked for, but torch sees no CUDA device")
    return name


def main(argv: list[str] | None = None) -> int:
    from . import bench, inspect_data, pack, preprocess, preview, serve
    parser = argparse.ArgumentParser(prog="fastload", description=" ".join(__doc__.split("\n\n")[0].split()))
    commands = parser.add_subparsers(dest="command", required=True)
    bench.add_arguments(commands.add_parser("bench", help="images/s of fastload (and torch) on your data",
                                            description=bench.__doc__.split("\n\n")[0]))
    preview.add_arguments(commands.add_parser("preview", help="a PNG grid of augmented samples",
                                              description=preview.__doc__.split("\n\n")[0]))
    inspect_data.add_arguments(commands.add_parser("inspect", help="what is in a dataset, what will fail",
                                                   description=inspect_data.__doc__.split("\n\n")[0]))
    preprocess.add_arguments(commands.add_parser("preprocess", help="run a JSON pipeline on image files",
                                                 description=preprocess.__doc__.split("\n\n")[0]))
    serve.add_arguments(commands.add_parser("serve", help="an HTTP classifier behind a JSON pipeline",
                                            description=serve.__doc__.split("\n\n")[0]))
    pack.add_arguments(commands.add_parser("pack", help="write WebDataset tar shards from a dataset",
                                           description=pack.__doc__.split("\n\n")[0]))
    args = parser.parse_args(argv)
    runs = {"bench": bench.run, "preview": preview.run, "inspect": inspect_data.run, "preprocess": preprocess.run,
            "serve": serve.run, "pack": pack.run}
    return runs[args.command](args)


def add_recipe_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--transform", default=default, choices=sorted(RECIPES),
                        help=f"a built-in recipe (default: {default})")


if __name__ == "__main__":
    sys.exit(main())
