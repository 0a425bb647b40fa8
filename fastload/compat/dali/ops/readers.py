"""``ops.readers``."""

from .. import detection, operators
from ._classes import legacy as _legacy

File = _legacy("File", operators.readers_file)
COCO = _legacy("COCO", detection.readers_coco)

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "ops.readers")  # any other name: NotImplementedError naming it
