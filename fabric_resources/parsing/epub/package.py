"""Step 2 of the EPUB parser: the package.

``META-INF/container.xml`` -> OPF (or the shallowest ``.opf`` when the
container is missing), manifest, spine, title, language, and
``META-INF/encryption.xml`` (font obfuscation is tolerated; real encryption of
text documents is ``encrypted``).
"""

from __future__ import annotations

import posixpath
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.epub.archive import Archive, MemberUnusable
from fabric_resources.parsing.epub.markup import DC_NS, by_name, join_href, local_name, parse_xml, squash

_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})


@dataclass(frozen=True)
class ManifestItem:
    id: str
    href: str  # as written in the manifest
    path: str  # resolved zip path
    media_type: str
    properties: frozenset[str]


@dataclass
class Package:
    path: str
    version: str
    title: str | None
    language: str | None
    manifest: dict[str, ManifestItem]
    spine: list[ManifestItem | str]  # a str is an idref the manifest lacks
    toc_id: str | None
    recovered: bool


def package_path(arc: Archive) -> str:
    """The OPF path from container.xml, else the shallowest ``.opf`` member."""
    try:
        root = parse_xml(arc.read("META-INF/container.xml"), arc.config.max_depth)
        for rootfile in by_name(root, "rootfile"):
            full_path = rootfile.get("full-path") or ""
            for candidate in (full_path, unquote(full_path)):
                if candidate and arc.find(candidate):
                    return unicodedata.normalize("NFC", candidate.lstrip("/"))
    except MemberUnusable:
        pass
    opfs = sorted((n for n in arc.members if n.lower().endswith(".opf")), key=lambda n: (n.count("/"), n))
    if not opfs:
        raise ParseError("malformed-container", "no usable container.xml and no .opf member")
    return opfs[0]


def read_package(arc: Archive, path: str) -> Package:
    try:
        data = arc.read(path)
    except MemberUnusable as exc:
        raise ParseError("malformed-package", f"{path}: {exc}") from None
    recovered = False
    try:
        root = parse_xml(data, arc.config.max_depth)
    except MemberUnusable:
        try:
            root, recovered = parse_xml(data, arc.config.max_depth, recover=True), True
        except MemberUnusable as exc:
            raise ParseError("malformed-package", f"{path}: {exc}") from None
    spines = by_name(root, "spine")
    if local_name(root) != "package" or not spines:
        raise ParseError("malformed-package", f"{path}: no package spine")
    base = posixpath.dirname(path)
    manifest: dict[str, ManifestItem] = {}
    for el in by_name(root, "item"):
        item_id, href = el.get("id"), el.get("href")
        target = join_href(base, href.split("#", 1)[0]) if href else None
        if item_id and target and item_id not in manifest:
            props = frozenset((el.get("properties") or "").split())
            manifest[item_id] = ManifestItem(item_id, href, target, (el.get("media-type") or "").lower(), props)
    spine: list[ManifestItem | str] = []
    for ref in by_name(spines[0], "itemref"):
        idref = ref.get("idref") or ""
        spine.append(manifest.get(idref, idref))
    dc = [el for el in root.iter() if isinstance(el.tag, str) and el.tag.startswith("{" + DC_NS)]
    titles = [squash(el.text or "") for el in dc if local_name(el) == "title"]
    langs = [squash(el.text or "") for el in dc if local_name(el) == "language"]
    version = "3" if (root.get("version") or "").strip().startswith("3") else "2"
    title, language = next((t for t in titles if t), None), next((t for t in langs if t), None)
    return Package(path, version, title, language, manifest, spine, spines[0].get("toc"), recovered)


_TEXT_SUFFIXES = (".xhtml", ".html", ".htm", ".opf", ".ncx")


def encrypted_targets(arc: Archive) -> tuple[set[str], int]:
    """Paths encryption.xml lists with real encryption, and the count of obfuscated fonts.

    Raises ``encrypted`` at once for text-like targets, so an encrypted OPF is
    reported as encryption rather than as a malformed package.
    """
    if arc.find("META-INF/encryption.xml") is None:
        return set(), 0
    try:
        root = parse_xml(arc.read("META-INF/encryption.xml"), arc.config.max_depth)
    except MemberUnusable as exc:
        raise ParseError("malformed-xml", f"META-INF/encryption.xml: {exc}") from None
    targets, obfuscated = set(), 0
    for data in by_name(root, "encrypteddata"):
        algorithms = {m.get("Algorithm") for m in by_name(data, "encryptionmethod")}
        if algorithms and algorithms <= _OBFUSCATION:
            obfuscated += 1
            continue
        for ref in by_name(data, "cipherreference"):
            target = join_href("", ref.get("URI") or "")
            if target and target.lower().endswith(_TEXT_SUFFIXES):
                raise ParseError("encrypted", f"{target} is encrypted")
            targets.add(target or "")
    return targets, obfuscated
