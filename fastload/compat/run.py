"""``python -m fastload.compat.run script.py ARGS``: run a DALI script unchanged, on fastload.

For this run only, ``nvidia.dali`` and its submodules resolve to
``fastload.compat.dali`` (an import hook placed first on ``sys.meta_path``);
nothing is installed, and an installed DALI is left alone. The script runs
as ``__main__`` with ``sys.argv`` as it would have had.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import runpy
import sys
import types

ALIASES = {"nvidia.dali": "fastload.compat.dali", "amd.rocal": "fastload.compat.rocal"}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str | None):
        self.target = target

    def create_module(self, spec):
        if self.target is None:  # an empty "nvidia" package where no real one is installed
            module = types.ModuleType(spec.name)
            module.__path__ = []
            return module
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        pass


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``nvidia.dali[.x]`` as ``fastload.compat.dali[.x]`` (and ``nvidia`` itself if it is missing)."""

    def find_spec(self, fullname, path=None, target=None):
        for alias, real in ALIASES.items():
            if fullname == alias or fullname.startswith(alias + "."):
                return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real + fullname[len(alias):]),
                                                      is_package=True)
            if alias.startswith(fullname + "."):  # a parent package ("nvidia")
                for finder in sys.meta_path:
                    if finder is not self and getattr(finder, "find_spec", None):
                        spec = finder.find_spec(fullname, path, target)
                        if spec is not None:
                            return None  # the real one imports as usual
                return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None), is_package=True)
        return None


def install() -> None:
    """Make ``nvidia.dali`` resolve to fastload's package in this process (from now on)."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        for name in [m for m in sys.modules if m == "nvidia.dali" or m.startswith("nvidia.dali.")]:
            del sys.modules[name]  # an already imported real DALI is not what the script gets
        sys.meta_path.insert(0, AliasFinder())


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    install()
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
