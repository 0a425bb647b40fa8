"""What a reader node gives per sample, for both front ends: the encoded bytes and the label its source
read for this sample (``SampleContext.readers``), as the uint8 and int32 tensors DALI's and rocAL's file
readers output; and the LMDB environments both front ends' Caffe readers read."""

from __future__ import annotations

import os
import threading
import weakref

import torch

_OPEN_LMDB = weakref.WeakValueDictionary()  # real path -> its Environment, while some reader holds it
_OPENING_LMDB = threading.Lock()


def read_sample(ctx, op):
    """The reader ``op``'s (bytes, label) for the sample ``ctx`` runs, as tensors."""
    data, label = ctx.readers[op.id]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), torch.tensor([label], dtype=torch.int32)


def open_lmdb(lmdb, path: str):
    """The LMDB environment at ``path`` opened read-only with the ``lmdb`` module, one per folder in the
    process, shared by every reader of it (DALI's and rocAL's) while one holds it: py-lmdb refuses to open
    an environment twice in a process, and DALI and rocAL let two pipelines (or a rebuilt one) read the
    same folder. lmdb.Error as py-lmdb raises it."""
    key = os.path.realpath(path)
    with _OPENING_LMDB:
        env = _OPEN_LMDB.get(key)
        if env is None:
            env = _OPEN_LMDB[key] = lmdb.open(path, readonly=True, lock=False, readahead=False, max_readers=512)
        return env
