"""Where the indexes of shards and record files live: beside the data, or in a cache folder.

An index (offsets, sizes, labels) is built by reading its file once; it is
reused while it still describes the file (the caller's ``matches``) and
written atomically, so threads and processes of a node that index the same
file at once never read half of one.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Callable


def cache_folder(kind: str, given: str | None = None) -> str:
    """Where indexes of ``kind`` go when they cannot go beside their data: ``given``, else a folder of
    fastload's cache (sample_data.cache_root: $FASTLOAD_CACHE, $XDG_CACHE_HOME/fastload, ~/.cache/fastload)."""
    from .sample_data import cache_root
    return given or str(cache_root() / kind)


def cache_name(folder: str, path: str, suffix: str) -> str:
    """The index file for ``path`` in a shared cache ``folder``: the path (or URL) flattened to one name."""
    return os.path.join(folder, re.sub(r"[^A-Za-z0-9_.-]", "_", path.strip("/")) + suffix)


def cached_index(places: list[str], matches: Callable[[dict], bool], build: Callable[[], dict]) -> dict:
    """The first index in ``places`` that can be read and ``matches``; else ``build()``, written to the first
    of ``places`` that takes it (a temporary file renamed over it: atomic)."""
    for place in places:
        try:
            with open(place) as file:
                index = json.load(file)
            if matches(index):
                return index
        except (OSError, ValueError):
            pass
    index = build()
    for place in places:
        try:
            os.makedirs(os.path.dirname(place) or ".", exist_ok=True)
            temporary = f"{place}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(temporary, "w") as file:
                json.dump(index, file)
            os.replace(temporary, place)
            break
        except OSError:
            continue
    return index
