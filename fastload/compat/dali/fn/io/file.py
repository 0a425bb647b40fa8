"""``fn.io.file.read``: a file's bytes, its path given per sample."""

from ...operators import io_file_read as read  # noqa: F401
