"""``fn.readers``: the file reader and the COCO reader (DALI's other readers are not supported)."""

from ..detection import readers_coco as coco  # noqa: F401
from ..operators import readers_file as file  # noqa: F401

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "fn.readers")  # any other name: NotImplementedError naming it
