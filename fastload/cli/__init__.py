"""The ``fastload`` command: bench, preview and inspect a dataset; pack it into tar shards; run a JSON
preprocessing pipeline, or serve a classifier behind one (also `python -m fastload`).

Building the parser imports no torch (the subcommand that runs does), so
``--help``, ``--version`` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import os
import sys

from .._version import DISTRIBUTION, __version__
from ..recipes import RECIPES


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help (argparse's own rule), without repeating one the text gives."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, "", argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


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


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, every subcommand's options with their defaults (nothing heavy is imported)."""
    from . import bench, inspect_data, pack, preprocess, preview, serve
    parser = argparse.ArgumentParser(prog="fastload", description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"fastload {__version__} ({DISTRIBUTION})")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_subparser)
    for name, module, summary in (("bench", bench, "images/s of fastload (and torch) on your data"),
                                  ("preview", preview, "a PNG grid of augmented samples"),
                                  ("inspect", inspect_data, "what is in a dataset, what will fail"),
                                  ("preprocess", preprocess, "run a JSON pipeline on image files"),
                                  ("serve", serve, "an HTTP classifier behind a JSON pipeline"),
                                  ("pack", pack, "write WebDataset tar shards from a dataset")):
        module.add_arguments(commands.add_parser(name, help=summary, description=module.__doc__.split("\n\n")[0]))
        commands.choices[name].set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


def _subparser(**options) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(formatter_class=_HelpFormatter, **options)


def add_recipe_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--transform", default=default, choices=sorted(RECIPES),
                        help=f"a built-in recipe (default: {default})")


if __name__ == "__main__":
    sys.exit(main())
