"""fastload: a drop-in, thread-based replacement for torch.utils.data.DataLoader for image training.

The public names load on first use (PEP 562), so ``import fastload`` and the
``fastload`` command's ``--help`` and ``--version`` answer without importing
torch; ``from fastload import DataLoader`` imports what it needs.
"""

from __future__ import annotations

import importlib

from ._version import DISTRIBUTION, __version__

# public name -> the module that defines it
_PUBLIC = {
    "DataLoader": ".loader", "ImageFolder": ".sources", "FileList": ".sources", "Encoded": ".sources",
    "Source": ".sources", "TarShards": ".tarshards", "TFRecords": ".tfrecords", "DecodeError": ".errors",
    "LoaderError": ".errors", "Stats": ".stats",
}

__all__ = ["DataLoader", "ImageFolder", "FileList", "Encoded", "TarShards", "TFRecords", "Source", "transforms",
           "DecodeError", "LoaderError", "Stats", "DISTRIBUTION", "__version__"]


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    elif name == "transforms":
        value = importlib.import_module(".transforms", __name__)
    else:
        raise AttributeError(f"module 'fastload' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
