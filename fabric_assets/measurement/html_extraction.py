"""Main-text extraction scored on labelled web pages (``../shared/eval/html-extraction``).

The scoring is the one trafilatura's evaluation uses: per page, a labelled
main-text snippet found in the extraction is a true positive (else a false
negative), a labelled boilerplate snippet found is a false positive (else a
true negative); precision, recall and F1 over all snippets of all pages.
Whitespace is collapsed on both sides before matching.

Three extractors run over the same pages in one call: Fabric's HTML parser
(trafilatura decides the main text, lxml keeps the element path), the same
walk with a tag rule only (every block element outside scripts and styles,
``main_text = "all"``), and ``trafilatura.extract`` with its defaults.

Run: ``.venv/bin/python -m fabric_assets.measurement.html_extraction ../shared/eval/html-extraction``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class ExtractionScore:
    """Snippet counts and the scores derived from them (precision, recall, F1 in [0, 1])."""

    name: str
    tp: int
    fp: int
    fn: int
    tn: int
    pages: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def row(self) -> dict[str, str]:
        return {"extractor": self.name, "pages": str(self.pages), "precision": f"{self.precision:.3f}",
                "recall": f"{self.recall:.3f}", "f1": f"{self.f1:.3f}",
                "boilerplate leaked": f"{self.fp}/{self.fp + self.tn}"}


def score(name: str, pages: dict[str, dict], extract: Callable[[bytes], str], root: Path) -> ExtractionScore:
    """Score ``extract(page bytes) -> text`` over ``pages`` (evaldata.json entries present under ``root``)."""
    tp = fp = fn = tn = n = 0
    for file_name, labels in sorted(pages.items()):
        path = root / file_name
        if not path.is_file():
            continue
        n += 1
        text = _WS.sub(" ", extract(path.read_bytes()) or "")
        for snippet in labels.get("with", []):
            if _WS.sub(" ", snippet).strip() in text:
                tp += 1
            else:
                fn += 1
        for snippet in labels.get("without", []):
            if _WS.sub(" ", snippet).strip() in text:
                fp += 1
            else:
                tn += 1
    return ExtractionScore(name, tp, fp, fn, tn, n)


def fabric_extractor(main_text: str) -> Callable[[bytes], str]:
    """Fabric's HTML parser (in-process) as an extractor: its units' texts joined by newlines."""
    from fabric_resources.config import HtmlParserConfig, IsolationConfig
    from fabric_resources.parsing.document import ParseError
    from fabric_resources.parsing.html.parser import parse_html

    config = HtmlParserConfig(main_text=main_text, isolation=IsolationConfig(mode="in-process"))

    def extract(data: bytes) -> str:
        try:
            return "\n".join(u.text for u in parse_html(data, config).units)
        except ParseError:
            return ""

    return extract


def trafilatura_defaults(data: bytes) -> str:
    import trafilatura

    return trafilatura.extract(data) or ""


def evaluate(root: Path) -> list[ExtractionScore]:
    """The three extractors over the pages of ``root`` (with its ``evaldata.json``), one run."""
    pages = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    return [
        score("fabric html parser (trafilatura main text + lxml walk)", pages, fabric_extractor("trafilatura"), root),
        score("fabric walk, tag rule only (main_text=all)", pages, fabric_extractor("all"), root),
        score("trafilatura.extract defaults", pages, trafilatura_defaults, root),
    ]


if __name__ == "__main__":
    for result in evaluate(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval/html-extraction")):
        print(json.dumps(result.row()))
