"""DALI's ``fn`` API: operators as functions that add to the pipeline being defined.

Every name here and in the sub-modules (``fn.decoders``, ``fn.readers``, ``fn.random``, ``fn.transforms``,
``fn.io.file``, ``fn.experimental``...) is put in place by ``spec.install`` from the operators' declarations
(``@operator(...)`` beside each builder in its family's module: ``operators``, ``detection``, ``geometry``,
``affine``, ``effects``, ``pointwise``, ``arrays``, ``reductions``, ``noise``, ``python_function``, ``filters``,
``remap``, ``resize_crop``, ``boxes``, ``record_readers`` (with ``numpy_readers`` and ``lmdb_readers``),
``audio``), DALI's deprecated names (``fn.image_decoder``, ``fn.coin_flip``, ``fn.file_reader``) with them. A
name refused on purpose (``spec.refused``: ``fn.jitter``, GPU-only in DALI 2.4) says why; the PyTorch plugin's
own ``fn`` is ``plugin.pytorch.fn``.
"""

from .. import affine, detection, effects, geometry, operators  # noqa: F401  (their @operator declarations)
from .. import (arrays, audio, batch_ops, boxes, filters, noise, pointwise, python_function,  # noqa: F401
               record_readers, reductions, remap, resize_crop, segmentation, sequences)
from .. import gpu_only  # noqa: F401  (the GPU-only operators' refusals, with their reason)
from .. import spec as _spec
from ..unsupported import refuse

_spec.install(_spec.FN)

__getattr__ = refuse(__name__, "fn", _spec.nearby("fn"), _spec.REFUSED)  # any other name: refused, named
