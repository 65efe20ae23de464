"""Step 4 of the EPUB parser: the walk over each spine XHTML document.

Block elements become :class:`ParsedUnit` objects; tables, notes, page markers,
ruby and languages are handled as described on
:func:`fabric_resources.parsing.epub.parser.parse_epub`. All character
positions are Unicode scalar offsets, end-exclusive.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

from lxml import etree

from fabric_resources.parsing.document import ParsedRelationship, ParsedUnit, ParseError
from fabric_resources.parsing.epub.markup import (
    BLOCK_TAGS, HEADING_TAGS, NOTE_TYPES, NOTEREF_TYPES, NOTES_SECTION_TYPES, PAGEBREAK_TYPES, is_skipped, join_href,
    lang_of, local_name, plain_text, primary_lang, squash, type_tokens,
)
from fabric_resources.parsing.epub.package import ManifestItem
from fabric_resources.parsing.long_units import split_long_text
from fabric_resources.parsing.table_grid import GridBudget, cell_columns, column_span, row_span



@dataclass(frozen=True)
class _Ctx:
    """What a container passes down: the kind of its bare text, list state, language."""

    kind: str = "paragraph"
    attrs: tuple[tuple[str, Any], ...] = ()
    lang: str | None = None
    figure: tuple[tuple[str, Any], ...] | None = None
    list_depth: int = 0
    ordered: bool = False
    in_notes: bool = False


@dataclass
class _Buffer:
    """Raw text of one unit being built, with link spans, late page labels and inline notes."""

    parts: list[str] = field(default_factory=list)
    size: int = 0
    has_text: bool = False
    links: list[tuple[int, int, tuple[str, str], bool]] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    notes: list[etree._Element] = field(default_factory=list)

    def add(self, text: str | None) -> None:
        if text:
            self.parts.append(text)
            self.size += len(text)
            self.has_text = self.has_text or not text.isspace()


def _normalise(raw: str, pre: bool) -> tuple[str, list[int]]:
    """Normalised text and, per raw index, its output index (-1 when dropped)."""
    out: list[str] = []
    index = [-1] * len(raw)
    pending = False
    for i, ch in enumerate(raw):
        if pre:
            if ch == "\r":
                if raw[i + 1 : i + 2] == "\n":
                    continue
                ch = "\n"
        elif ch.isspace():
            pending = bool(out)
            continue
        if pending:
            out.append(" ")
            pending = False
        index[i] = len(out)
        out.append(ch)
    text = "".join(out)
    if pre:
        lead = len(text) - len(text.lstrip())
        text = text.strip()
        index = [j - lead if 0 <= j - lead < len(text) else -1 for j in index]
    return text, index


class Walker:
    """Walks spine documents in order, accumulating units and relationships."""

    def __init__(self, doc_lang: str | None, max_unit_chars: int | None = None, max_units: int | None = None) -> None:
        self.doc_lang = doc_lang
        self.max_unit_chars = max_unit_chars
        self.max_units = max_units
        self.repaired = False
        self.units: list[ParsedUnit] = []
        self.relationships: list[ParsedRelationship] = []
        self.refs: list[tuple[int, int, int, str, tuple[str, str], bool]] = []
        self.notes: dict[tuple[str, str], int] = {}
        self.page: str | None = None
        self.toc_path: tuple[str, ...] | None = None
        self.headings: list[tuple[int, str]] = []
        self.tables = self.figures = 0
        self.grid_budget = GridBudget()  # the book's tables share it
        self.doc_toc: dict[str, tuple[str, ...]] = {}

    def walk(self, root: etree._Element, spine_index: int, item: ManifestItem, toc: dict[str, tuple[str, ...]],
             repaired: bool = False) -> None:
        """Append the units of one spine document; ``repaired``: its bytes had UTF-8 repaired,
        so each unit counts its U+FFFD characters as ``decoding_repairs``."""
        self.spine_index, self.href, self.doc_path = spine_index, item.href, item.path
        self.repaired = repaired
        self.doc_dir = posixpath.dirname(item.path)
        self.root_tree = root.getroottree()
        self.root_name = local_name(root) or "html"
        self.root, self.steps, self.paths = root, {}, {}
        ids = {el.get("id") for el in root.iter() if isinstance(el.tag, str) and el.get("id")}
        starts = [path for frag, path in toc.items() if not frag or frag not in ids]
        if starts:
            self.toc_path = max(starts, key=len)
        self.doc_toc = {frag: path for frag, path in toc.items() if frag in ids}
        body = next((c for c in root if local_name(c) == "body"), root)
        self._dispatch(body, _Ctx(lang=lang_of(root)))

    def resolve_note_refs(self) -> int:
        """Turn collected links into note_ref relationships; return the unresolved noteref count."""
        unresolved = 0
        for source, start, end, label, key, is_noteref in self.refs:
            target = self.notes.get(key)
            if target is None:
                unresolved += is_noteref
            elif target != source:
                attrs = {"start_char": start, "end_char": end, "label": label}
                self.relationships.append(ParsedRelationship("note_ref", source, target, attrs))
        return unresolved

    # -- structure

    def _dispatch(self, el: etree._Element, ctx: _Ctx) -> None:
        tag = local_name(el)
        if is_skipped(el, tag):
            return
        self._mark(el)
        tokens = type_tokens(el)
        ctx = self._with_lang(el, ctx)
        if tokens & PAGEBREAK_TYPES:
            self.page = self._page_label(el) or self.page
        elif tokens & NOTE_TYPES or (ctx.in_notes and tag == "li"):
            index = self._flat("note", el, ctx, {"note_id": el.get("id")})
            if index is not None and el.get("id"):
                self.notes[(self.doc_path, el.get("id"))] = index
        elif tag in HEADING_TAGS:
            self._flat("heading", el, ctx, {"level": int(tag[1])})
        elif tag in ("p", "dt", "summary", "legend"):
            self._flat(ctx.kind, el, ctx, dict(ctx.attrs))
        elif tag == "pre":
            self._flat("preformatted", el, ctx, {}, pre=True)
        elif tag == "table":
            self._table(el, ctx)
        elif tag in ("figcaption", "caption"):
            self._flat("figure_caption", el, ctx, dict(ctx.figure or ()))
        elif tag == "figure":
            self._figure(el, ctx)
        else:
            if tokens & NOTES_SECTION_TYPES:
                ctx = replace(ctx, in_notes=True)
            if tag in ("ol", "ul", "menu", "dir"):
                ctx = replace(ctx, list_depth=ctx.list_depth + 1, ordered=tag == "ol")
            elif tag == "li":
                attrs = (("depth", max(ctx.list_depth, 1)), ("ordered", ctx.ordered))
                ctx = replace(ctx, kind="list_item", attrs=attrs)
            elif tag == "blockquote":
                ctx = replace(ctx, kind="blockquote", attrs=())
            self._container(el, ctx)

    def _container(self, el: etree._Element, ctx: _Ctx) -> None:
        """Blocks are dispatched; runs of inline content between them become units of ``ctx.kind``."""
        buf = _Buffer()
        buf.add(el.text)
        for child in el:
            tag = local_name(child)
            if tag is not None and (tag in BLOCK_TAGS or type_tokens(child) & NOTE_TYPES):
                self._emit(ctx.kind, buf, el, ctx, dict(ctx.attrs))
                buf = _Buffer()
                self._dispatch(child, ctx)
            else:
                self._inline(child, buf, pre=False)
            buf.add(child.tail)
        self._emit(ctx.kind, buf, el, ctx, dict(ctx.attrs))

    def _table(self, el: etree._Element, ctx: _Ctx) -> None:
        table = self.tables
        self.tables += 1
        caption, first_cell, row = None, None, 0
        grid: list[tuple[etree._Element, str]] = []  # (tr, its group's tag), in document order
        for part in el:
            tag = local_name(part)
            if tag == "caption":
                caption = self._flat("figure_caption", part, self._with_lang(part, ctx), {"table_id": table})
                continue
            if tag not in ("tr", "thead", "tbody", "tfoot"):
                continue
            grid.extend((tr, tag) for tr in ([part] if tag == "tr" else [r for r in part if local_name(r) == "tr"]))
        cells_of = [[c for c in tr if local_name(c) in ("td", "th")] for tr, _ in grid]
        columns = cell_columns([[(column_span(c.get("colspan")), row_span(c.get("rowspan"))) for c in cells]
                                for cells in cells_of], self.grid_budget)
        for (tr, tag), cells, starts in zip(grid, cells_of, columns):
            self._mark(tr)
            previous = None
            for cell, col in zip(cells, starts):
                attrs = {"table": table, "row": row, "col": col, "header": local_name(cell) == "th" or tag == "thead"}
                current = self._flat("table_cell", cell, self._with_lang(cell, ctx), attrs)
                if current is not None:
                    if previous is not None:
                        self.relationships.append(ParsedRelationship("next_in_table_row", previous, current))
                    previous = current
                    first_cell = current if first_cell is None else first_cell
            row += 1
        if caption is not None and first_cell is not None:
            self.relationships.append(ParsedRelationship("caption_of", caption, first_cell, {"table_id": table}))

    def _figure(self, el: etree._Element, ctx: _Ctx) -> None:
        info: dict[str, Any] = {"figure_id": self.figures}
        self.figures += 1
        img = next((e for e in el.iter() if local_name(e) == "img"), None)
        if img is not None:
            src = img.get("src")
            info["src"] = join_href(self.doc_dir, src) if src else None
            info["alt"] = img.get("alt")
        self._container(el, replace(ctx, figure=tuple(info.items())))

    # -- text

    def _flat(self, kind: str, el: etree._Element, ctx: _Ctx, attrs: dict[str, Any], pre: bool = False) -> int | None:
        """One unit from all the text under ``el``."""
        self._mark(el)
        buf = _Buffer()
        buf.add(el.text)
        for child in el:
            self._inline(child, buf, pre)
            buf.add(child.tail)
        return self._emit(kind, buf, el, ctx, attrs, pre)

    def _inline(self, el: etree._Element, buf: _Buffer, pre: bool) -> None:
        """Append the text of ``el`` (not its tail) to ``buf``."""
        tag = local_name(el)
        if is_skipped(el, tag):
            return
        self._mark(el)
        tokens = type_tokens(el)
        if tokens & PAGEBREAK_TYPES:
            label = self._page_label(el)
            if label and buf.has_text:
                buf.pages.append(label)
            elif label:
                self.page = label
            return
        if tokens & NOTE_TYPES:
            buf.notes.append(el)
            return
        if tag == "br":
            buf.add("\n" if pre else " ")
            return
        block = tag in BLOCK_TAGS
        buf.add(" " if block and not pre else None)
        start = buf.size
        buf.add(el.text)
        for child in el:
            self._inline(child, buf, pre)
            buf.add(child.tail)
        if tag == "a" and "#" in (el.get("href") or ""):
            file_part, _, frag = el.get("href").partition("#")
            target = join_href(self.doc_dir, file_part) if file_part else self.doc_path
            if target and frag:
                buf.links.append((start, buf.size, (target, unquote(frag)), bool(tokens & NOTEREF_TYPES)))
        buf.add(" " if block and not pre else None)

    def _emit(
        self, kind: str, buf: _Buffer, el: etree._Element, ctx: _Ctx, attrs: dict[str, Any], pre: bool = False
    ) -> int | None:
        """Append a unit unless its normalised text is empty; apply late page labels and inline notes."""
        raw = "".join(buf.parts)
        if buf.links or pre:
            text, index = _normalise(raw, pre)
        else:
            text, index = squash(raw), []
        unit_index = None
        if text:
            if self.page is not None:
                attrs["page"] = self.page
            if ctx.lang and primary_lang(ctx.lang) != primary_lang(self.doc_lang):
                attrs["lang"] = ctx.lang
            pieces = [(0, len(text))]
            if self.max_unit_chars is not None and len(text) > self.max_unit_chars:
                pieces = split_long_text(text, self.max_unit_chars)
            if kind == "heading":
                title = text[: pieces[0][1]]
                self.headings = [h for h in self.headings if h[0] < attrs["level"]] + [(attrs["level"], title)]
            section = self.toc_path if self.toc_path is not None else tuple(t for _, t in self.headings)
            locator = {"spine_index": self.spine_index, "href": self.href, "element_path": self._path(el)}
            unit_index = len(self.units)
            for part, (start, end) in enumerate(pieces):
                piece_kind, piece_attrs, piece_locator = kind, dict(attrs), dict(locator)
                if len(pieces) > 1:
                    piece_attrs.update(part=part, parts=len(pieces))
                    piece_locator.update(char_start=start, char_end=end)
                    if kind == "heading" and part:  # the first piece is the section title
                        piece_kind = "paragraph"
                        piece_attrs.pop("level", None)
                repairs = text.count("\ufffd", start, end) if self.repaired else 0
                if repairs:
                    piece_attrs["decoding_repairs"] = repairs
                self.units.append(ParsedUnit(piece_kind, text[start:end], piece_locator, section,  # type: ignore[arg-type]
                                             piece_attrs))
            if self.max_units is not None and len(self.units) > self.max_units:
                raise ParseError("cap-units", f"more than {self.max_units} units")
            starts = [start for start, _ in pieces]
            for start, end, key, is_noteref in buf.links:
                kept = [index[i] for i in range(start, end) if index[i] >= 0]
                if kept:
                    part = bisect.bisect_right(starts, kept[0]) - 1
                    lo, hi = pieces[part]
                    first, last = max(kept[0], lo), min(kept[-1] + 1, hi)  # a marker cut by a piece edge is clipped
                    if last > first:
                        self.refs.append((unit_index + part, first - lo, last - lo, text[first:last], key, is_noteref))
        if buf.pages:
            self.page = buf.pages[-1]
        for note in buf.notes:
            self._dispatch(note, ctx)
        return unit_index

    # -- small helpers

    def _mark(self, el: etree._Element) -> None:
        """Entering an element that a TOC entry targets starts that entry's section."""
        if self.doc_toc:
            for name in (el.get("id"), el.get("name") if local_name(el) == "a" else None):
                if name and name in self.doc_toc:
                    self.toc_path = self.doc_toc[name]

    def _with_lang(self, el: etree._Element, ctx: _Ctx) -> _Ctx:
        lang = lang_of(el)
        return replace(ctx, lang=lang) if lang and lang != ctx.lang else ctx

    def _page_label(self, el: etree._Element) -> str:
        return squash(el.get("title") or el.get("aria-label") or "") or plain_text(el) or el.get("id") or ""

    def _path(self, el: etree._Element) -> str:
        rel = self._element_path(el)
        rel = re.sub(r"\{[^}]*\}", "", rel)
        return f"/{self.root_name}" + ("" if rel == "." else "/" + rel)

    def _element_path(self, el: etree._Element) -> str:
        """``root_tree.getelementpath(el)``, the same string, with each parent's children counted
        once (lxml counts the preceding siblings on every call: a chapter of 100,000 paragraphs
        spent 24 s there). A step is the tag, with its 1-based position among same-tag siblings
        when it has any."""
        if el is self.root or el.getparent() is None:
            return self.root_tree.getelementpath(el)
        if el in self.paths:
            return self.paths[el]
        parent = el.getparent()
        steps = self.steps.get(parent)
        if steps is None:
            children = [c for c in parent if isinstance(c.tag, str)]
            total, seen = Counter(c.tag for c in children), Counter()
            steps = self.steps[parent] = {}
            for c in children:
                seen[c.tag] += 1
                steps[c] = c.tag if total[c.tag] == 1 else f"{c.tag}[{seen[c.tag]}]"
        above = self._element_path(parent)
        return self.paths.setdefault(el, steps[el] if above == "." else f"{above}/{steps[el]}")
