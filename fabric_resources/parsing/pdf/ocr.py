"""OCR of page images through the Tesseract command-line program (when installed).

The engine is found once per process (``tesseract --version`` and
``--list-langs``); its version and the languages actually used describe it in
the parser identity (:func:`engine_description`), so installing or upgrading
Tesseract re-parses. Recognition is one ``tesseract stdin stdout tsv`` call
per image with ``OMP_THREAD_LIMIT=1`` (one thread: the same bytes give the
same words, and the machine's other work keeps its cores).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from typing import TYPE_CHECKING

from fabric_resources.parsing.pdf.layout import join_lines

if TYPE_CHECKING:
    from fabric_resources.config import OcrConfig


@dataclass(frozen=True)
class OcrEngine:
    """A usable Tesseract: the binary's path, its version, the ``-l`` value (installed packs only)."""

    path: str
    version: str
    languages: str


@dataclass(frozen=True)
class OcrParagraph:
    """Recognised text of one Tesseract paragraph.

    ``bbox`` is ``(left, top, right, bottom)`` in image pixels; ``confidence`` is the mean word
    confidence in [0, 1] (Tesseract's 0-100 scale divided by 100).
    """

    text: str
    bbox: tuple[int, int, int, int]
    confidence: float
    words: int


class OcrFailed(Exception):
    """Tesseract ran but did not produce a result (timeout, non-zero exit)."""


class OcrProbeFailed(Exception):
    """The installed Tesseract could not be asked its version and languages just now: it did not
    answer within :data:`PROBE_TIMEOUT_S`, or a signal ended it (a Ctrl-C to the process group).
    Nothing is known about the engine, so no PDF parser identity can be made: the scan that asked
    stops, and the next one asks again (never cached)."""


#: Seconds ``tesseract --version`` and ``--list-langs`` get each.
PROBE_TIMEOUT_S = 10


def find_engine(config: "OcrConfig") -> OcrEngine | None:
    """The engine ``config`` names, or ``None`` when OCR is off, the binary is missing, cannot run
    (it exits with an error every time) or no configured language pack is installed.

    Raises
    ------
    OcrProbeFailed
        Tesseract is installed but did not answer (a timeout, a signal). Answering "absent" there
        changed the PDF parser's identity, so a scan re-parsed every PDF without OCR (found by
        hostile trial 16c: a Ctrl-C to ``fabric ui`` during its first scan)."""
    if not config.enabled:
        return None
    return _probe(config.tesseract_cmd, config.languages)


@lru_cache(maxsize=8)
def _probe(cmd: str, languages: str) -> OcrEngine | None:
    path = shutil.which(cmd)
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, timeout=PROBE_TIMEOUT_S)
        listed = subprocess.run([path, "--list-langs"], capture_output=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise OcrProbeFailed(f"{path} {' '.join(exc.cmd[1:])} did not answer within {PROBE_TIMEOUT_S} s; "
                             "run the command again") from None
    except OSError:
        return None  # not executable (a broken install): unusable every time
    for run in (version, listed):
        if run.returncode < 0:
            raise OcrProbeFailed(f"{path} {' '.join(run.args[1:])} was ended by signal {-run.returncode}; "
                                 "run the command again")
        if run.returncode != 0:
            return None
    first = (version.stdout or version.stderr).decode("utf-8", "replace").splitlines()
    installed = set(listed.stdout.decode("utf-8", "replace").split()[1:]) if listed.stdout else set()
    wanted = [lang for lang in languages.split("+") if lang in installed]
    if not wanted:
        return None
    return OcrEngine(path, first[0].strip() if first else "tesseract", "+".join(wanted))


def engine_description(config: "OcrConfig") -> str:
    """What enters the PDF parser's identity: ``"<version> -l <langs>"``, ``"absent"`` or ``"off"``."""
    if not config.enabled:
        return "off"
    engine = find_engine(config)
    return "absent" if engine is None else f"{engine.version} -l {engine.languages}"


def recognise(image_png: bytes, engine: OcrEngine, timeout_s: float) -> list[OcrParagraph]:
    """Paragraphs Tesseract finds on one image, in its reading order.

    Parameters
    ----------
    image_png : bytes
        A PNG image.
    engine : OcrEngine
    timeout_s : float
        Wall clock for the one Tesseract call.

    Returns
    -------
    list[OcrParagraph]
        Words of one (block, paragraph) joined line by line with
        :func:`~fabric_resources.parsing.pdf.layout.join_lines`; empty when nothing was read.

    Raises
    ------
    OcrFailed
        On a timeout or a non-zero exit.
    """
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        proc = subprocess.run(
            [engine.path, "stdin", "stdout", "-l", engine.languages, "--psm", "3", "tsv"],
            input=image_png, capture_output=True, timeout=timeout_s, env=env, check=False,
        )
    except subprocess.TimeoutExpired:
        raise OcrFailed(f"tesseract took longer than {timeout_s:g} s") from None
    if proc.returncode != 0:
        raise OcrFailed(f"tesseract exit {proc.returncode}: {proc.stderr.decode('utf-8', 'replace')[-300:]}")
    return _paragraphs(proc.stdout.decode("utf-8", "replace"))


def _paragraphs(tsv: str) -> list[OcrParagraph]:
    groups: dict[tuple[int, int, int], dict[int, list[dict]]] = {}
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        text = (row.get("text") or "").strip()
        if row.get("level") != "5" or not text:
            continue
        key = (int(row["page_num"]), int(row["block_num"]), int(row["par_num"]))
        groups.setdefault(key, {}).setdefault(int(row["line_num"]), []).append(row)
    out = []
    for key in sorted(groups):
        lines = groups[key]
        words = [w for n in sorted(lines) for w in lines[n]]
        text = join_lines(_soft_breaks([_join_words([w["text"].strip() for w in lines[n]]) for n in sorted(lines)]))
        if not text:
            continue
        left = min(int(w["left"]) for w in words)
        top = min(int(w["top"]) for w in words)
        right = max(int(w["left"]) + int(w["width"]) for w in words)
        bottom = max(int(w["top"]) + int(w["height"]) for w in words)
        confs = [float(w["conf"]) for w in words if float(w["conf"]) >= 0]
        confidence = round(sum(confs) / len(confs) / 100.0, 4) if confs else 0.0
        out.append(OcrParagraph(text, (left, top, right, bottom), confidence, len(words)))
    return out


def _soft_breaks(lines: list[str]) -> list[str]:
    """Tesseract's lines with a hyphen that ends a line after a letter, before a line starting in
    lower case, marked as PDFium marks a line-end word break (U+FFFE), so
    :func:`~fabric_resources.parsing.pdf.layout.join_lines` joins ``tele-`` + ``communications``
    into ``telecommunications`` and keeps a compound's hyphen (``state-of-the-`` + ``art``). It
    read ``tele- communications``: the word was not found (pdf parser v8, hostile trial 13c).

    >>> _soft_breaks(["the tele-", "communications mast", "Tokyo-", "Osaka", "a -", "b"])
    ['the tele\ufffe', 'communications mast', 'Tokyo-', 'Osaka', 'a -', 'b']
    """
    out = list(lines)
    for i in range(len(out) - 1):
        line, following = out[i], out[i + 1]
        if len(line) >= 2 and line.endswith("-") and line[-2].isalpha() and following[:1].islower():
            out[i] = line[:-1] + "\ufffe"
    return out


_UNSPACED_EDGE = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uff60]")


def _join_words(words: list[str]) -> str:
    # Tesseract splits CJK text into one "word" per character or run; they join without spaces.
    out = ""
    for word in words:
        if out and not (_UNSPACED_EDGE.match(out[-1]) and _UNSPACED_EDGE.match(word[0])):
            out += " "
        out += word
    return out
