"""tantivy's on-disk index metadata (``meta.json``) and segment files, read and written by Fabric.

tantivy-py 0.27 (tantivy 0.27) gives Python no merge and no merge policy, so the serving index
assembles its generations itself: a generation directory is a set of immutable segments (hard
links) plus a ``meta.json`` that lists them. This module owns exactly that format, as tantivy
0.22–0.27 write it (``IndexMeta`` in tantivy's ``src/index/index_meta.rs``; its
``doc/src/index-fileformats.md``)::

    {"index_settings": {...}, "segments": [{"segment_id": "<uuid>", "max_doc": 5,
     "deletes": null | {"num_deleted_docs": 1, "opstamp": 9}}, ...], "schema": [...],
     "opstamp": 9, "payload": "..."?}

A segment's files are named by its UUID in simple (unhyphenated) hex plus a component
extension: ``.idx .pos .term .store .fast .fieldnorm`` and, when it has deletes,
``.<opstamp>.del``. :func:`load_meta` checks this shape and raises
:class:`IndexFormatChanged` on anything else, so a tantivy upgrade that changes it fails
loudly (``tests/resources/test_lexical_segments.py`` pins it against the installed tantivy) instead of
writing an index tantivy misreads.
"""

from __future__ import annotations

import json
import os
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TANTIVY_META = "meta.json"
#: Files tantivy keeps beside the segments that no generation shares.
PRIVATE_FILES = frozenset({TANTIVY_META, ".managed.json", ".tantivy-writer.lock", ".tantivy-meta.lock"})
_META_KEYS = {"index_settings", "segments", "schema", "opstamp"}
_SEGMENT_KEYS = {"segment_id", "max_doc", "deletes"}


class IndexFormatChanged(RuntimeError):
    """``meta.json`` does not have the shape this module writes (another tantivy version)."""


@dataclass(frozen=True)
class SegmentMeta:
    """One entry of ``meta.json``'s ``segments``: tantivy's UUID, documents held, deletes (None: none)."""

    segment_id: str
    max_doc: int
    deletes: dict | None

    @property
    def file_prefix(self) -> str:
        """The prefix of the segment's file names (its UUID as 32 hex digits, then a dot)."""
        return uuid.UUID(self.segment_id).hex + "."

    def as_json(self) -> dict:
        return {"segment_id": self.segment_id, "max_doc": self.max_doc, "deletes": self.deletes}


def load_meta(directory: Path) -> dict:
    """``directory``'s ``meta.json``, checked to have the shape described in the module docstring.

    Raises
    ------
    OSError, ValueError
        If the file cannot be read or is not JSON.
    IndexFormatChanged
        If its keys or its segment entries differ from that shape.
    """
    meta = json.loads((Path(directory) / TANTIVY_META).read_text())
    if not isinstance(meta, dict) or not _META_KEYS <= set(meta) <= _META_KEYS | {"payload"}:
        raise IndexFormatChanged(f"{directory}/{TANTIVY_META} has keys {sorted(meta) if isinstance(meta, dict) else meta!r}, "
                                 f"expected {sorted(_META_KEYS)} (+ payload)")
    if not isinstance(meta["segments"], list) or not isinstance(meta["opstamp"], int):
        raise IndexFormatChanged(f"{directory}/{TANTIVY_META}: segments is not a list or opstamp not an integer")
    for entry in meta["segments"]:
        if not isinstance(entry, dict) or set(entry) != _SEGMENT_KEYS or not isinstance(entry["max_doc"], int):
            raise IndexFormatChanged(f"{directory}/{TANTIVY_META}: segment entry {entry!r}, expected keys "
                                     f"{sorted(_SEGMENT_KEYS)} with an integer max_doc")
        try:
            uuid.UUID(entry["segment_id"])
        except (TypeError, ValueError, AttributeError) as exc:
            raise IndexFormatChanged(f"{directory}/{TANTIVY_META}: segment_id {entry['segment_id']!r} "
                                     "is not a UUID") from exc
    return meta


def segments(meta: dict) -> list[SegmentMeta]:
    """The segments ``meta`` lists, in its order (tantivy numbers them ``segment_ord`` in this order)."""
    return [SegmentMeta(e["segment_id"], e["max_doc"], e["deletes"]) for e in meta["segments"]]


def write_meta(directory: Path, template: dict, listed: list[SegmentMeta], opstamp: int) -> None:
    """Write ``directory``'s ``meta.json``: ``template`` (schema, settings) listing ``listed``.

    Written to a temporary name and renamed, as tantivy does, so a reader never sees half a file.
    """
    meta = {k: v for k, v in template.items() if k != "payload"}
    meta["segments"] = [s.as_json() for s in listed]
    meta["opstamp"] = opstamp
    tmp = Path(directory) / f".{TANTIVY_META}.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, Path(directory) / TANTIVY_META)


def segment_files(directory: Path, segment: SegmentMeta, names: Iterable[str] | None = None) -> list[Path]:
    """The files of ``segment`` in ``directory`` (its components; a ``.del`` file only if it has deletes).

    ``names``: the directory's regular files, listed once by a caller that asks about many
    segments (listing it per segment made a generation's assembly grow with segments × files).

    Raises
    ------
    IndexFormatChanged
        If the directory holds no file of the segment (its files are named otherwise).
    """
    prefix = segment.file_prefix
    if names is None:
        names = [p.name for p in Path(directory).iterdir() if p.is_file()]
    found = sorted(Path(directory) / n for n in names if n.startswith(prefix))
    if not any(p.suffix == ".idx" for p in found):
        raise IndexFormatChanged(f"no {prefix}idx in {directory}: segment files are not named by the simple UUID")
    return found


#: The magic number ending every file tantivy writes for a segment (``FOOTER_MAGIC_NUMBER`` in
#: tantivy's ``src/directory/footer.rs``), after its footer: ``{"version": …, "crc": <CRC-32 of the
#: bytes before the footer>}`` as JSON, then the JSON's length (u32 LE), then this (u32 LE).
FOOTER_MAGIC = 1337


def footer_problem(path: Path) -> str | None:
    """Why ``path``, a segment file tantivy wrote, is damaged (its footer missing or unreadable,
    or its bytes not those its footer's CRC-32 was computed over), or None when it checks out.
    tantivy checks these only when asked (``Index::validate_checksum``, which tantivy-py does not
    expose); a reader decodes flipped postings or positions without noticing. Reads the whole file.
    """
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 8:
                return "shorter than its footer"
            fh.seek(size - 8)
            length, magic = int.from_bytes(fh.read(4), "little"), int.from_bytes(fh.read(4), "little")
            if magic != FOOTER_MAGIC or length > size - 8:
                return "no tantivy footer"
            fh.seek(size - 8 - length)
            try:
                crc = json.loads(fh.read(length))["crc"]
            except (ValueError, KeyError, TypeError):
                return "footer unreadable"
            fh.seek(0)
            left, actual = size - 8 - length, 0
            while left:
                block = fh.read(min(left, 1 << 20))
                if not block:
                    return "shorter than its footer says"
                actual, left = zlib.crc32(block, actual), left - len(block)
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})"
    return None if actual == crc else "checksum mismatch"


def damaged_segment_files(directory: Path) -> list[str]:
    """``"<file>: <why>"`` for each file of the segments ``directory``'s ``meta.json`` lists that
    :func:`footer_problem` finds damaged (or that is missing), in name order.

    Raises
    ------
    OSError, ValueError, IndexFormatChanged
        As :func:`load_meta` and :func:`segment_files`.
    """
    names = [p.name for p in Path(directory).iterdir() if p.is_file()]
    out = []
    for segment in segments(load_meta(directory)):
        files = segment_files(directory, segment, names)
        expected = {segment.file_prefix + ext for ext in ("idx", "pos", "term", "store", "fast", "fieldnorm")}
        out += [f"{name}: missing" for name in sorted(expected - {p.name for p in files})]
        out += [f"{p.name}: {why}" for p in files if (why := footer_problem(p)) is not None]
    return sorted(out)
