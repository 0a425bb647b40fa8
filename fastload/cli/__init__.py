"""The ``fastload`` command: bench, preview and inspect a dataset; pack it into tar shards; run a JSON
preprocessing pipeline, or serve a classifier behind one (also `python -m fastload`).

Building the parser imports no torch (the subcommand that runs does), so
``--help``, ``--version`` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import sys

from .._version import DISTRIBUTION, __version__


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help (argparse's own rule), without repeating one the text gives."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, "", argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, every subcommand's options with their defaults (nothing heavy is imported)."""
    from . import bench, doctor, inspect_data, pack, preprocess, preview, serve
    parser = argparse.ArgumentParser(prog="fastload", description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"fastload {__version__} ({DISTRIBUTION})")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_subparser)
    for name, module, summary in (("bench", bench, "images/s of fastload (and torch) on your data"),
                                  ("preview", preview, "a PNG grid of augmented samples"),
                                  ("inspect", inspect_data, "what is in a dataset, what will fail"),
                                  ("preprocess", preprocess, "run a JSON pipeline on image files"),
                                  ("serve", serve, "an HTTP classifier behind a JSON pipeline"),
                                  ("pack", pack, "write WebDataset tar shards from a dataset"),
                                  ("doctor", doctor, "what this install runs with: C extensions, decoders, "
                                                     "torch, CUDA")):
        module.add_arguments(commands.add_parser(name, help=summary, description=module.__doc__.split("\n\n")[0]))
        commands.choices[name].set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


def _subparser(**options) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(formatter_class=_HelpFormatter, **options)


if __name__ == "__main__":
    sys.exit(main())
