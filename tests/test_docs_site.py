"""The documentation site (mkdocs.yml) builds in strict mode: a broken link (into docs/ or to a file of
the repository), a missing reference or a docstring that does not render fails the build. The API
reference pages carry the public classes' signatures and arguments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
def test_the_site_builds_strictly_with_its_api_reference(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, capture_output=True, text=True, timeout=280,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    loader = (site / "api" / "loader" / "index.html").read_text()
    assert "prefetch_factor" in loader and "DataLoader" in loader
    sources = (site / "api" / "sources" / "index.html").read_text()
    assert all(name in sources for name in ("ImageFolder", "FileList", "TarShards", "TFRecords", "Encoded"))
    assert (site / "repo" / "benchmarks" / "RESULTS" / "index.html").exists()  # a linked repository page


def test_a_link_to_a_missing_file_fails_the_build(monkeypatch):
    """The hook that carries repository files refuses a link to one that does not exist."""
    pytest.importorskip("mkdocs")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mkdocs_hooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from mkdocs.exceptions import PluginError
    page = ROOT / "docs" / "install.md"

    class Page:
        abs_src_path = str(page)

    class Files(list):
        def documentation_pages(self):
            return [Page]

    class Config:
        docs_dir = str(ROOT / "docs")
    monkeypatch.setattr(mkdocs_hooks, "_links", lambda path: iter(["../no/such/file.md"]))
    with pytest.raises(PluginError, match="names no file"):
        mkdocs_hooks.on_files(Files(), Config())
