"""What a reader node gives per sample, for both front ends: the encoded bytes and the label its source
read for this sample (``SampleContext.readers``), as the uint8 and int32 tensors DALI's and rocAL's file
readers output."""

from __future__ import annotations

import torch


def read_sample(ctx, op):
    """The reader ``op``'s (bytes, label) for the sample ``ctx`` runs, as tensors."""
    data, label = ctx.readers[op.id]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), torch.tensor([label], dtype=torch.int32)
