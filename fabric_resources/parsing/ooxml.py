"""Admission of Office Open XML packages (DOCX, PPTX): a zip, checked under caps before any read.

Shared by the DOCX and PPTX plug-ins. The checks mirror the EPUB archive step: member count,
declared decompressed bytes, per-member compression ratio; a password-protected Office file is an
OLE compound file (not a zip) and is named ``encrypted``.
"""

from __future__ import annotations

import io
import zipfile

from fabric_resources.parsing.document import ParseError

#: The first bytes of an OLE compound file: what Office writes for a password-protected DOCX/PPTX.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def admit_package(data: bytes, config, kind: str) -> None:
    """Raise :class:`ParseError` unless ``data`` is a zip within ``config``'s caps.

    Parameters
    ----------
    data : bytes
    config
        ``max_members``, ``max_decompressed_bytes``, ``max_compression_ratio``.
    kind : str
        ``"docx"`` or ``"pptx"``: names the ``malformed-<kind>`` reason.

    Raises
    ------
    ParseError
        ``empty-file``, ``encrypted`` (OLE container), ``malformed-<kind>`` (not a zip),
        ``cap-members``, ``cap-decompressed-bytes``, ``cap-compression-ratio``.
    """
    if not data:
        raise ParseError("empty-file", "zero bytes")
    if data.startswith(OLE_MAGIC):
        raise ParseError("encrypted", "an OLE compound file: a password-protected (or pre-2007) Office file")
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ParseError(f"malformed-{kind}", f"not a zip: {exc}") from None
    if len(infos) > config.max_members:
        raise ParseError("cap-members", f"{len(infos)} members")
    declared = sum(info.file_size for info in infos)
    if declared > config.max_decompressed_bytes:
        raise ParseError("cap-decompressed-bytes", f"{declared} bytes declared")
    for info in infos:
        if info.file_size and info.file_size > max(info.compress_size, 1) * config.max_compression_ratio:
            raise ParseError("cap-compression-ratio", f"{info.filename}: {info.file_size}/{info.compress_size}")
        if info.flag_bits & 0x1:
            raise ParseError("encrypted", f"{info.filename}: zip encryption flag")
