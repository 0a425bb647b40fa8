"""The distribution's name and version, in one place that imports nothing (setup.py and the command read it)."""

DISTRIBUTION = "torch-fastload"  # the PyPI name; `fastload` on PyPI is an unrelated file downloader
__version__ = "0.2.0"


def install_hint(extra: str) -> str:
    """The pip command that installs one of fastload's optional extras, for error messages."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
