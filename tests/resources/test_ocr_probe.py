"""Asking Tesseract what it is: a probe that could not ask is no answer (hostile trial 16c).

The PDF parser's identity holds the OCR engine's version and languages ("absent" without one).
A probe ended by a signal (a Ctrl-C to ``fabric ui``'s process group during its first scan) or
by its timeout answered "absent": the identity changed, the scan re-pointed every PDF to a new
parse without OCR, and the process kept that answer for its whole life.
"""

from __future__ import annotations

import json
import stat

import pytest
from conftest import ingest

from fabric_resources.config import OcrConfig
from fabric_resources.home import FabricHome
from fabric_resources.parsing.pdf import ocr

ANSWERS = """#!/bin/sh
case "$1" in
  --version) echo "tesseract 5.3.0" ;;
  --list-langs) printf 'List of available languages (2):\\neng\\nosd\\n' ;;
esac
"""
INTERRUPTED = "#!/bin/sh\nkill -INT $$\nsleep 5\n"
SLOW = "#!/bin/sh\nsleep 5\n"


def _tesseract(path, script: str) -> str:
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    ocr._probe.cache_clear()
    return str(path)


@pytest.fixture
def fake(tmp_path):
    yield tmp_path / "tesseract"
    ocr._probe.cache_clear()


def test_a_probe_that_could_not_ask_raises_and_is_not_kept(fake, monkeypatch):
    """guards against: a signal or a timeout read as "no Tesseract" (and cached for the process)."""
    config = OcrConfig(tesseract_cmd=_tesseract(fake, ANSWERS), languages="eng")
    assert ocr.engine_description(config) == "tesseract 5.3.0 -l eng"
    _tesseract(fake, INTERRUPTED)
    with pytest.raises(ocr.OcrProbeFailed, match="ended by signal 2"):
        ocr.engine_description(config)
    monkeypatch.setattr(ocr, "PROBE_TIMEOUT_S", 0.5)
    _tesseract(fake, SLOW)
    with pytest.raises(ocr.OcrProbeFailed, match="did not answer within 0.5 s"):
        ocr.engine_description(config)
    fake.write_text(ANSWERS)  # the same process asks again once the engine answers
    assert ocr.engine_description(config) == "tesseract 5.3.0 -l eng"
    # What still reads as absent: no binary, or one that fails every time it runs.
    assert ocr.engine_description(OcrConfig(tesseract_cmd=str(fake.parent / "none"))) == "absent"
    _tesseract(fake, "#!/bin/sh\nexit 1\n")
    assert ocr.engine_description(config) == "absent"


def test_an_ingest_whose_probe_is_interrupted_re_points_no_pdf(fake, tmp_path):
    """guards against: a scan that took an interrupted probe for "absent" re-pointing every PDF to a
    parse without OCR. The scan stops before it records anything; the next one finds nothing to do."""
    from test_parsing_formats import _text_pdf

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.pdf").write_bytes(_text_pdf([(72, 700, "The lighthouse keeper logged the tide.")]))
    FabricHome(tmp_path / "home").layout.config_file.write_text(json.dumps(
        {"parsers": {"pdf": {"ocr": {"tesseract_cmd": _tesseract(fake, ANSWERS), "languages": "eng"},
                             "isolation": {"mode": "in-process"}}}}))
    home = FabricHome(tmp_path / "home")  # opened after its config is written: it reads it once
    ingest(corpus, home)
    before = {s.source_key: s.parse_id for s in home.catalog.sources()}
    _tesseract(fake, INTERRUPTED)
    with pytest.raises(ocr.OcrProbeFailed):
        ingest(corpus, FabricHome(home.root))
    assert {s.source_key: s.parse_id for s in FabricHome(home.root).catalog.sources()} == before
    _tesseract(fake, ANSWERS)
    summary = ingest(corpus, FabricHome(home.root))
    assert {s.source_key: s.parse_id for s in FabricHome(home.root).catalog.sources()} == before
    assert not summary.scan.reparsed and not summary.scan.changed
