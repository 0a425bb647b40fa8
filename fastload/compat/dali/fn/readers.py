"""``fn.readers``: the file reader (DALI's other readers are not supported)."""

from ..operators import readers_file as file  # noqa: F401
