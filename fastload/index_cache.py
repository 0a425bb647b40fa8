"""Where the indexes of shards and record files live: beside the data, or in a cache folder.

An index (offsets, sizes, labels) is built by reading its file once; it is
reused while it still describes the file (the caller's ``matches``) and
written atomically, so threads and processes of a node that index the same
file at once never read half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from typing import Callable

READABLE = 80  # characters of a path kept in a cache file's name; a hash of the whole path makes it unique
# the query parameters that sign a URL (S3, GCS, CloudFront, Azure SAS): the same object whoever signs it
_SIGNING = re.compile(r"^(x-amz-.*|x-goog-.*|signature|expires|awsaccesskeyid|googleaccessid|key-pair-id|policy|"
                      r"sig|se|st|sp|sv|sr|spr|skoid|sktid|skt|ske|sks|skv)$", re.IGNORECASE)


def cache_folder(kind: str, given: str | None = None) -> str:
    """Where indexes of ``kind`` go when they cannot go beside their data: ``given``, else a folder of
    fastload's cache (sample_data.cache_root: $FASTLOAD_CACHE, $XDG_CACHE_HOME/fastload, ~/.cache/fastload)."""
    from .sample_data import cache_root
    return given or str(cache_root() / kind)


def cache_key(path: str) -> str:
    """What names ``path`` in a cache: the path or URL less the query parameters that only sign it (a
    presigned URL, signed anew each run, is still the same object; its recorded version tells changes)."""
    base, mark, query = path.partition("?")
    kept = [item for item in query.split("&") if item and not _SIGNING.match(item.partition("=")[0])]
    return base + (mark + "&".join(kept) if kept else "")


def cache_name(folder: str, path: str, suffix: str) -> str:
    """The file for ``path`` in a shared cache ``folder``: the end of the path (or URL, without its query)
    flattened to at most ``READABLE`` characters, then a hash of ``cache_key(path)``: a bounded name (file
    systems refuse names over 255 bytes; a presigned URL's query alone can be longer) that is unique."""
    key = cache_key(path)
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", key.partition("?")[0].strip("/"))[-READABLE:].lstrip("._-")
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return os.path.join(folder, f"{readable}-{digest}{suffix}")


def cached_index(places: list[str], matches: Callable[[dict], bool], build: Callable[[], dict]) -> dict:
    """The first index in ``places`` that can be read and ``matches``; else ``build()``, written to the first
    of ``places`` that takes it (a temporary file renamed over it: atomic). An index that is not JSON (or JSON
    nested too deeply to load), not an object, or lacks what ``matches`` looks for (a KeyError, TypeError, ...
    there) is rebuilt."""
    for place in places:
        try:
            with open(place) as file:
                index = json.load(file)
            if isinstance(index, dict) and matches(index):
                return index
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
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
