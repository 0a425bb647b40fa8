"""The one protocol rocAL's recorded readers meet (``RecordedReader``), and the argument refusals they share.

Why: in rocAL most readers (fn.readers.file, tfrecord, webdataset, mxnet, coco, caffe, caffe2) only record
what to read, and the decoder given the record does the reading. Each record's class says how a decoder
reads it (``decoder_samples``), so the decoder asks the record (``ops_readers._reader_node``) instead of
switching on its type. A leaf module, so that the format modules (``coco``, ``mxnet``, ``caffe``,
``webdataset``) can meet the protocol without importing the operators.
"""

from __future__ import annotations

import os
from typing import Callable, Protocol, runtime_checkable

PREFIX = "fastload.compat.rocal"


@runtime_checkable
class RecordedReader(Protocol):
    """What a rocAL reader records, for the decoder that reads it.

    Attributes:
        sharded: whether the decoder's shard_id applies (False: rocAL never passes it; fastload reads shard 0).
    """

    sharded: bool

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map,
                        num_shards: int) -> tuple[list, Callable[[int], bytes] | None]:
        """The samples [(path, label)] decoder ``decoder`` (e.g. "fn.decoders.image") reads with its own
        ``file_root``, ``path`` and ``user_feature_key_map`` arguments, and ``read(index)`` for a reader of
        records (None: read the sample's file). It refuses what rocAL's decoder would read otherwise, and
        may record on ``definition`` (the pipeline's ``definition.Definition``) what the pipeline hands out
        beside the images (COCO's annotations)."""
        ...


def refuse(operator: str, **given) -> None:
    """NotImplementedError for arguments given that fastload does not run as rocAL does."""
    named = [name for name, value in given.items() if value]
    if named:
        raise NotImplementedError(f"{PREFIX}: {operator}: {', '.join(named)} not supported")


def same_path(decoder: str, path: str, reader_path: str, reader: str) -> None:
    """A decoder's path, where it has one, is its reader's: rocAL's decoder reads its path's images and the
    reader its path's labels."""
    if path and os.path.abspath(path) != os.path.abspath(reader_path):
        raise ValueError(f"{PREFIX}: {decoder}(path={path!r}) after {reader}(path={reader_path!r}): rocAL's "
                         f"decoder reads its path's images and the reader its path's labels")
