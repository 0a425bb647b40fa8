"""MkDocs hooks for fastload's documentation site (mkdocs.yml).

The guides in docs/ link to files of the repository outside docs/ (the README, CHANGELOG.md,
benchmarks/RESULTS.md, source and test files). The site carries those files under ``repo/``: Markdown ones
as pages, the rest as they are. Their links are rewritten to those copies, so that the strict build
checks every one. A link to a file that does not exist is an error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(\]\()([^)#\s:]+)(#[^)\s]*)?(\))")  # [text](relative/path#anchor): no scheme, no spaces
PREFIX = "repo"


def _target(source: Path, link: str) -> Path:
    return (source.parent / link).resolve()


def _site_uri(target: Path, docs: Path) -> str:
    """The uri of a repository file on the site: its place under docs/, or under repo/."""
    if docs in target.parents:
        return target.relative_to(docs).as_posix()
    return f"{PREFIX}/{target.relative_to(ROOT).as_posix()}"


def _links(path: Path):
    for match in LINK.finditer(path.read_text(encoding="utf-8")):
        yield match.group(2)


def on_files(files, config):
    """Add every repository file a page links to (and, for Markdown ones, what they link to)."""
    docs = Path(config.docs_dir).resolve()
    pending = [Path(page.abs_src_path) for page in files.documentation_pages()]
    seen = set()
    while pending:
        source = pending.pop()
        for link in _links(source):
            target = _target(source, link)
            if not target.exists():
                raise PluginError(f"{source.relative_to(ROOT)}: the link {link!r} names no file")
            if docs in target.parents or target == docs or target in seen or target.is_dir():
                continue
            if ROOT not in target.parents:
                raise PluginError(f"{source.relative_to(ROOT)}: the link {link!r} leaves the repository")
            seen.add(target)
            files.append(File.generated(config, _site_uri(target, docs), abs_src_path=str(target)))
            if target.suffix == ".md":
                pending.append(target)
    return files


def on_page_markdown(markdown, page, config, files):
    """Links resolved against the page's own file, pointed at that file's place on the site."""
    docs = Path(config.docs_dir).resolve()
    source = Path(page.file.abs_src_path)
    here = os.path.dirname(page.file.src_uri)

    def rewrite(match):
        target = _target(source, match.group(2))
        if not target.exists() or target.is_dir():
            return match.group(0)  # (a folder: left for MkDocs to report)
        uri = os.path.relpath(_site_uri(target, docs), here or ".")
        return f"{match.group(1)}{uri}{match.group(3) or ''}{match.group(4)}"
    return LINK.sub(rewrite, markdown)
