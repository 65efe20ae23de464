"""Step 1 of the EPUB parser: admission of the zip under the caps, and member reads.

Member count, declared and actual decompressed bytes, per-member compression
ratio, per-document XML size and the zip encryption flag are checked; any cap
breached fails the whole parse (:class:`ParseError`). A member that is missing
or unreadable is :class:`MemberUnusable`, and the caller decides what that means.
"""

from __future__ import annotations

import io
import unicodedata
import zipfile
import zlib

from fabric_resources.config import EpubParserConfig
from fabric_resources.parsing.document import ParseError

MEMBER_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError)


class MemberUnusable(Exception):
    """A member is missing, unreadable or unparseable; the caller decides what that means."""


class Archive:
    """The zip, admitted under the caps; members are looked up by normalised path."""

    def __init__(self, data: bytes, config: EpubParserConfig) -> None:
        if not data:
            raise ParseError("empty-file", "zero bytes")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except Exception as exc:  # zipfile raises many types on junk input
            raise ParseError("not-a-zip", str(exc)) from None
        self.config = config
        self.read_total = 0
        _admit(infos, config)
        self.members: dict[str, zipfile.ZipInfo] = {}
        self.folded: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if not info.is_dir():
                name = _member_name(info)
                self.members.setdefault(name, info)
                self.folded.setdefault(name.casefold(), info)

    def find(self, path: str) -> zipfile.ZipInfo | None:
        """The member at ``path`` (exact, NFC, then case-insensitive), or ``None``."""
        key = unicodedata.normalize("NFC", path.lstrip("/"))
        return self.members.get(key) or self.folded.get(key.casefold())

    def read(self, path: str) -> bytes:
        """One XML member's bytes, counting toward the caps while reading."""
        info = self.find(path)
        if info is None:
            raise MemberUnusable("missing-member")
        cfg = self.config
        if info.file_size > cfg.max_xml_bytes:
            raise ParseError("cap-xml-bytes", f"{path}: {info.file_size} bytes declared")
        ratio_limit = max(info.compress_size, 1) * cfg.max_compression_ratio
        out = bytearray()
        try:
            with self.zip.open(info) as handle:
                while chunk := handle.read(1 << 16):
                    out += chunk
                    self.read_total += len(chunk)
                    if self.read_total > cfg.max_decompressed_bytes:
                        raise ParseError("cap-decompressed-bytes", "while reading")
                    if len(out) > ratio_limit:
                        raise ParseError("cap-compression-ratio", f"{path} while reading")
                    if len(out) > cfg.max_xml_bytes:
                        raise ParseError("cap-xml-bytes", f"{path} while reading")
        except MEMBER_ERRORS as exc:
            raise MemberUnusable(f"unreadable-member: {exc}") from None
        return bytes(out)


def _admit(infos: list[zipfile.ZipInfo], cfg: EpubParserConfig) -> None:
    """Check the declared sizes and flags of all members before anything is read."""
    if len(infos) > cfg.max_members:
        raise ParseError("cap-members", f"{len(infos)} members")
    declared = sum(info.file_size for info in infos)
    if declared > cfg.max_decompressed_bytes:
        raise ParseError("cap-decompressed-bytes", f"{declared} bytes declared")
    for info in infos:
        if info.file_size and info.file_size > max(info.compress_size, 1) * cfg.max_compression_ratio:
            raise ParseError("cap-compression-ratio", f"{info.filename}: {info.file_size}/{info.compress_size}")
        if info.flag_bits & 0x1:
            raise ParseError("encrypted", f"{info.filename}: zip encryption flag")


def _member_name(info: zipfile.ZipInfo) -> str:
    """Member name, repairing UTF-8 names stored without the UTF-8 flag (read as cp437)."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            name = name.encode("cp437").decode("utf-8")
        except (UnicodeError, ValueError):
            pass
    return unicodedata.normalize("NFC", name)
