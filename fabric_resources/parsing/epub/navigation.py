"""Step 3 of the EPUB parser: the table of contents.

The EPUB 3 nav document (``epub:type="toc"``), else the EPUB 2 NCX. Each entry
is a title path and a target (spine document, optional fragment id).
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import unquote

from lxml import etree

from fabric_resources.parsing.epub.archive import Archive, MemberUnusable
from fabric_resources.parsing.epub.markup import by_name, join_href, local_name, parse_content, parse_xml, plain_text, type_tokens
from fabric_resources.parsing.epub.package import Package

Toc = dict[int, dict[str, tuple[str, ...]]]  # spine index -> fragment ("" = file) -> title path


def read_toc(arc: Archive, pkg: Package, spine_pos: dict[str, int]) -> tuple[str, Toc, list[str]]:
    """The TOC as ``(source, entries, errors)``; nav preferred, NCX next, else ``"none"``."""
    toc: Toc = {}
    errors: list[str] = []

    def add(base: str, href: str | None, path: tuple[str, ...]) -> None:
        if not href or not path:
            return
        file_part, _, frag = href.partition("#")
        target = join_href(base, file_part) if file_part else None
        index = spine_pos.get(target) if target else None
        if index is not None:
            entries = toc.setdefault(index, {})
            key = unquote(frag)
            if key not in entries or len(path) >= len(entries[key]):
                entries[key] = path

    nav = next((i for i in pkg.manifest.values() if "nav" in i.properties), None)
    if nav is not None:
        try:
            root, _ = parse_content(arc.read(nav.path), arc.config.max_depth)
            navs = [el for el in by_name(root, "nav") if type_tokens(el) & {"toc", "doc-toc"}]
            lists = [ol for el in navs[:1] for ol in el.iter() if local_name(ol) == "ol"]
            if lists:
                _nav_list(lists[0], (), posixpath.dirname(nav.path), add)
        except MemberUnusable as exc:
            errors.append(f"nav: {exc}")
        if toc:
            return "nav", toc, errors
    ncx = pkg.manifest.get(pkg.toc_id or "")
    ncx = ncx or next((i for i in pkg.manifest.values() if i.media_type == "application/x-dtbncx+xml"), None)
    if ncx is not None:
        try:
            root = parse_xml(arc.read(ncx.path), arc.config.max_depth, recover=True)
            for nav_map in by_name(root, "navmap")[:1]:
                _ncx_points(nav_map, (), posixpath.dirname(ncx.path), add)
        except MemberUnusable as exc:
            errors.append(f"ncx: {exc}")
        if toc:
            return "ncx", toc, errors
    return "none", toc, errors


def _nav_list(ol: etree._Element, prefix: tuple[str, ...], base: str, add: Any) -> None:
    for li in (c for c in ol if local_name(c) == "li"):
        label = next((c for c in li if local_name(c) in ("a", "span")), None)
        title = plain_text(label) if label is not None else ""
        path = prefix + (title,) if title else prefix
        add(base, label.get("href") if label is not None else None, path)
        for sub in (c for c in li if local_name(c) == "ol"):
            _nav_list(sub, path, base, add)


def _ncx_points(parent: etree._Element, prefix: tuple[str, ...], base: str, add: Any) -> None:
    for point in (c for c in parent if local_name(c) == "navpoint"):
        label = next((t for lab in point if local_name(lab) == "navlabel" for t in lab if local_name(t) == "text"), None)
        title = plain_text(label) if label is not None else ""
        path = prefix + (title,) if title else prefix
        content = next((c for c in point if local_name(c) == "content"), None)
        add(base, content.get("src") if content is not None else None, path)
        _ncx_points(point, path, base, add)
