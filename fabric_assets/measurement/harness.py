"""What ``fabric eval`` and ``fabric eval-tune`` share: BEIR collections and the query side of a run.

Owns the BEIR reader (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``), the
deterministic split of the queries into a **dev** half (odd numeric IDs, or odd
SHA-256 for other IDs) used for tuning and a **test** half reported by default,
the corpus written as one UTF-8 text file per entry (``<title>\\n\\n<text>``),
the rule that benchmark questions are free text, a query-vector memo and the
test for a CJK collection. The run itself is :mod:`fabric_assets.measurement.eval_run`,
the baselines :mod:`~fabric_assets.measurement.baselines`, the grid
:mod:`~fabric_assets.measurement.tuning`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from fabric_resources.config import QueryConfig
from fabric_resources.text_folding import UNSPACED

Split = Literal["dev", "test", "all"]
#: Chunks fetched per query and system: the depth every channel hands fusion in a default search
#: (``query.channel_depth``; a search asks ``max(channel_depth, limit)``). Scored deeper, Fabric would
#: be another system: the e5 route's min-max normalisation and RRF's tail both move with the depth
#: (JSQuAD test at 300: 0.9470 nDCG@10; at the 100 a user's search uses: 0.9434). Recall@100 is
#: counted over the documents of these chunks, for every system alike.
DEPTH = QueryConfig().channel_depth


@dataclass
class BeirCollection:
    name: str
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(folder: Path) -> BeirCollection:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` (header line skipped).

    Raises
    ------
    FileNotFoundError
        If one of the three files is missing.
    """
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            corpus[str(d["_id"])] = (d.get("title") or "", d.get("text") or "")
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            queries[str(d["_id"])] = d["text"]
    qrels: dict[str, dict[str, int]] = {}
    for i, line in enumerate((folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if len(parts) < 3 or (i == 0 and not parts[2].strip().lstrip("-").isdigit()):
            continue
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return BeirCollection(folder.name, corpus, queries, qrels)


def in_split(query_id: str, split: Split) -> bool:
    """Whether ``query_id`` is in ``split``: dev holds odd numeric IDs (odd SHA-256 for other IDs),
    test the rest, all every query."""
    if split == "all":
        return True
    odd = int(query_id) % 2 == 1 if query_id.isdigit() else int(hashlib.sha256(query_id.encode()).hexdigest(), 16) % 2 == 1
    return odd if split == "dev" else not odd


def _file_name(doc_id: str, index: int) -> str:
    return f"{index:06d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', doc_id)[:80]}.txt"


def write_corpus(collection: BeirCollection, folder: Path) -> dict[str, str]:
    """One UTF-8 text file per corpus entry; returns file name → corpus ID."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for i, (doc_id, (title, text)) in enumerate(sorted(collection.corpus.items())):
        name = _file_name(doc_id, i)
        body = f"{title}\n\n{text}\n" if title else f"{text}\n"
        (folder / name).write_text(body, encoding="utf-8")
        names[name] = doc_id
    return names


class QueryVectorMemo:
    """An ``Encoder`` that remembers query vectors, so the stage variants and tuning grid points
    that re-run a query do not re-encode it (the vectors are identical: same model, same text).

    Each text is encoded on its own, as a search encodes its query: encoded in one padded batch, the
    vectors differed in the last digits and moved JSQuAD's dev figure by 0.0008 nDCG@10 (0.9465
    batched against 0.9457 one at a time), so ``fabric eval`` scored vectors no user's search gets.
    """

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.identity = encoder.identity
        self._memo: dict[str, np.ndarray] = {}

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode_passages(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        for t in dict.fromkeys(texts):
            if t not in self._memo:
                self._memo[t] = self.encoder.encode_queries([t])[0]
        return np.stack([self._memo[t] for t in texts]) if texts else self.encoder.encode_queries([])


def is_cjk(texts: list[str]) -> bool:
    """Whether a collection is CJK: more than half the letters of its first 200 texts are of an
    unspaced script (:data:`fabric_resources.text_folding.UNSPACED`)."""
    sample = "".join(texts[:200])
    letters = [c for c in sample if c.isalnum()]
    return bool(letters) and len(UNSPACED.findall("".join(letters))) * 2 > len(letters)


def as_free_text(query: str) -> str:
    """Benchmark questions are free text: quotes and a leading '-' must not become syntax."""
    cleaned = query.replace('"', " ")
    cleaned = re.sub(r"(^|\s)-+", r"\1", cleaned)
    cleaned = re.sub(r"\b(path|type|after|before|source):", r"\1 ", cleaned, flags=re.IGNORECASE)
    return cleaned[:1000] if cleaned.strip() else "?"
