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
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from fabric_assets.measurement.metrics import first_occurrence
from fabric_resources.config import QueryConfig
from fabric_resources.locks import exclusive_lock
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


class BeirFormatError(ValueError):
    """A BEIR folder that cannot be read as one: a missing or unreadable file, a line that is not a
    JSON object with an ``_id``, a duplicate ID, a qrels line that is not ``query-id<TAB>corpus-id<TAB>
    integer score``, or no document at all. The message names the file and line."""


def _read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file; a byte-order mark is dropped (Windows editors write one)."""
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise BeirFormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise BeirFormatError(f"{path}: {exc.strerror or exc}") from None


def _jsonl(path: Path, text_fields: tuple[str, ...], required: tuple[str, ...]) -> dict[str, dict]:
    """``_id`` → the JSON object of each non-blank line of ``path``, checked (see :class:`BeirFormatError`)."""
    out: dict[str, dict] = {}
    first_line: dict[str, int] = {}
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BeirFormatError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(d, dict):
            raise BeirFormatError(f"{path}:{n}: not a JSON object")
        raw = d.get("_id")
        if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
            raise BeirFormatError(f"{path}:{n}: _id must be a non-empty string or an integer, got {raw!r}")
        for f in text_fields:
            value = d.get(f)
            if value is None and f in required:
                raise BeirFormatError(f"{path}:{n}: no {f!r}")
            if value is not None and not isinstance(value, str):
                raise BeirFormatError(f"{path}:{n}: {f!r} must be a string, got {type(value).__name__}")
        doc_id = str(raw)
        if doc_id in out:
            raise BeirFormatError(f"{path}:{n}: duplicate _id {doc_id!r} (first on line {first_line[doc_id]})")
        out[doc_id], first_line[doc_id] = d, n
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_beir(folder: Path) -> BeirCollection:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` (UTF-8, a byte-order mark
    dropped). The collection is named after the folder's absolute path (``.`` is its directory's name:
    the corpus is written to ``<work dir>/<name>``, which for an empty name was the work dir itself).

    The qrels' first line is a header when its third field is not a number; every other line is
    ``query-id<TAB>corpus-id<TAB>score`` (more columns ignored) with an integer score. A repeated
    judgement must repeat its score. Blank lines are skipped everywhere.

    Raises
    ------
    BeirFormatError
        A file missing or unreadable, a malformed line (named with its number), a duplicate ID, a
        non-string title or text, a conflicting repeated judgement, or an empty corpus.
    """
    folder = Path(os.path.abspath(folder))
    corpus = {k: (d.get("title") or "", d.get("text") or "")
              for k, d in _jsonl(folder / "corpus.jsonl", ("title", "text"), ()).items()}
    if not corpus:
        raise BeirFormatError(f"{folder / 'corpus.jsonl'}: no document")
    queries = {k: d["text"] for k, d in _jsonl(folder / "queries.jsonl", ("text",), ("text",)).items()}
    qrels: dict[str, dict[str, int]] = {}
    path = folder / "qrels" / "test.tsv"
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if n == 1 and len(parts) >= 3 and not _is_number(parts[2]):
            continue  # the header
        if len(parts) < 3 or not parts[0] or not parts[1]:
            raise BeirFormatError(f"{path}:{n}: expected query-id<TAB>corpus-id<TAB>score, got {line[:80]!r}")
        try:
            score = int(parts[2])
        except ValueError:
            raise BeirFormatError(f"{path}:{n}: score {parts[2]!r} is not an integer") from None
        judged = qrels.setdefault(parts[0], {})
        if judged.get(parts[1], score) != score:
            raise BeirFormatError(f"{path}:{n}: {parts[0]!r} judges {parts[1]!r} again with another score "
                                  f"({judged[parts[1]]}, then {score})")
        judged[parts[1]] = score
    return BeirCollection(folder.name, corpus, queries, qrels)


def in_split(query_id: str, split: Split) -> bool:
    """Whether ``query_id`` is in ``split``: dev holds odd numeric IDs (odd SHA-256 for other IDs),
    test the rest, all every query."""
    if split == "all":
        return True
    odd = int(query_id) % 2 == 1 if query_id.isdecimal() else int(hashlib.sha256(query_id.encode()).hexdigest(), 16) % 2 == 1
    return odd if split == "dev" else not odd


def judged_queries(collection: BeirCollection, split: Split) -> list[str]:
    """The queries of ``split`` a run scores, in ``queries.jsonl`` order: those with at least one
    judgement above 0 (:func:`~fabric_assets.measurement.metrics.score_run` averages over no other;
    a query judged only 0 was run, left out of the means, and still counted in ``queries``).

    Raises
    ------
    BeirFormatError
        No such query (a qrels file whose IDs match no query's, or a split with none).
    """
    qids = [q for q in collection.queries
            if in_split(q, split) and any(g > 0 for g in collection.qrels.get(q, {}).values())]
    if not qids:
        raise BeirFormatError(
            f"{collection.name}: no query of the {split} split has a judgement above 0 in qrels/test.tsv "
            f"({len(collection.queries)} queries in queries.jsonl, {len(collection.qrels)} query IDs in the qrels)")
    return qids


def unscorable_judgements(collection: BeirCollection, split: Split, scored: list[str]) -> dict[str, int]:
    """What the qrels of ``split`` judge relevant that no run can show, counted so a run can say so:
    ``missing_documents``, judgements above 0 of the ``scored`` queries naming a corpus ID absent from
    ``corpus.jsonl`` (relevant and never retrieved: they lower recall and nDCG, as in trec_eval),
    and ``queries_without_text``, judged query IDs of ``split`` absent from ``queries.jsonl`` (not run)."""
    return {
        "missing_documents": sum(1 for q in scored for d, g in collection.qrels[q].items()
                                 if g > 0 and d not in collection.corpus),
        "queries_without_text": sum(1 for q, judged in collection.qrels.items()
                                    if q not in collection.queries and in_split(q, split)
                                    and any(g > 0 for g in judged.values())),
    }


_FILE_NAME = re.compile(r"\d{6}-[A-Za-z0-9_.-]{0,80}\.txt")  # what _file_name writes


def _file_name(doc_id: str, index: int) -> str:
    return f"{index:06d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', doc_id)[:80]}.txt"


def write_corpus(collection: BeirCollection, folder: Path) -> dict[str, str]:
    """One UTF-8 text file per corpus entry; returns file name → corpus ID.

    Files of an earlier run in ``folder`` (a reused work dir) named as this function names them but
    not in this corpus are removed, so the ingest drops them: kept, a changed corpus re-ingested its
    removed entries (and ``fabric eval`` failed on them with a ``KeyError``)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for i, (doc_id, (title, text)) in enumerate(sorted(collection.corpus.items())):
        name = _file_name(doc_id, i)
        body = f"{title}\n\n{text}\n" if title else f"{text}\n"
        (folder / name).write_text(body, encoding="utf-8")
        names[name] = doc_id
    for stale in folder.iterdir():
        if stale.name not in names and _FILE_NAME.fullmatch(stale.name) and stale.is_file():
            stale.unlink()
    return names


class WorkDirError(ValueError):
    """The home under an eval work dir holds documents that are not the collection's (another
    collection was evaluated there): its chunks would be ranked beside the collection's."""


#: What an eval work dir holds beside ``<work dir>/<collection name>``, the corpus :func:`write_corpus` writes.
WORK_DIR_ENTRIES = ("home", "lancedb-baseline")


def check_work_dir_name(collection: BeirCollection) -> None:
    """Refuse a collection whose name is one of :data:`WORK_DIR_ENTRIES`: its corpus would be written
    into the home (or the baseline table) and the ingest refused it as the home's own files.

    Raises
    ------
    WorkDirError
        The name is taken.
    """
    if collection.name in WORK_DIR_ENTRIES:
        raise WorkDirError(f"a collection folder named {collection.name!r} would be written into the work dir's own "
                           f"{collection.name}/ folder; copy or link it under another name")


#: The file that marks a folder as an eval work dir, and that a running eval holds locked.
WORK_DIR_MARK = ".fabric-eval"


@contextmanager
def claimed_work_dir(scratch: Path, collection: BeirCollection) -> Iterator[None]:
    """Hold ``scratch`` as ``collection``'s work dir for one eval.

    An eval writes, overwrites and removes files there (:func:`write_corpus`), so a folder it did not
    make is refused: one that holds anything but the collection's folder and
    :data:`WORK_DIR_ENTRIES` and has no :data:`WORK_DIR_MARK` (a work dir an older Fabric made holds
    only those, and is marked now). The mark is locked while the eval runs: a second eval there at
    once (say with another ``--config``, which it writes into the shared home) is refused.

    Raises
    ------
    WorkDirError
        The collection's name is taken (:func:`check_work_dir_name`), the folder is not an eval
        work dir, or another eval holds it.
    """
    check_work_dir_name(collection)
    if scratch.exists() and not scratch.is_dir():
        raise WorkDirError(f"the work dir {scratch} is a file; give a folder")
    mark = scratch / WORK_DIR_MARK
    if scratch.exists() and not mark.exists():
        foreign = sorted(p.name for p in scratch.iterdir() if p.name not in {collection.name, *WORK_DIR_ENTRIES})
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise WorkDirError(f"the work dir {scratch} holds files fabric eval did not write ({shown}); it writes "
                               "and removes files there: give an empty or new folder")
    held = ExitStack()
    try:
        held.enter_context(exclusive_lock(mark, wait=False))
    except BlockingIOError:
        raise WorkDirError(f"another fabric eval is using the work dir {scratch}; wait for it or give another "
                           "folder") from None
    with held:
        yield


def document_ranker(view, collection: BeirCollection, names: dict[str, str]) -> Callable[[Iterable[str]], list[str]]:
    """Chunk IDs best first → corpus IDs best first (a document at its best chunk's rank), for the
    release ``view`` of the corpus :func:`write_corpus` wrote as ``names``.

    Entries of identical text share one parse and its chunks (a parse is content-addressed), so a
    chunk stands for every entry of its parse, in corpus-ID order: one copy kept made the others
    unfindable (CACM holds 191 such entries, 10 of them judged relevant; Cranfield's 995, relevant
    to query 125, is 471's text).

    Raises
    ------
    WorkDirError
        ``view`` holds a source that is not a file of ``names``.
    """
    label = f"fs:{collection.name}/"
    entries: dict[str, list[str]] = {}
    for key, meta in view.sources.items():
        name = key[len(label):] if key.startswith(label) else None
        if name not in names:
            raise WorkDirError(f"the eval home holds {key}, which is not a document of {collection.name}: "
                               "another collection was evaluated in this work dir; use another --work-dir")
        entries.setdefault(meta["parse_id"], []).append(names[name])
    entries = {parse: sorted(ids) for parse, ids in entries.items()}
    parse_of_chunk = dict(zip(view.chunks.column("chunk_id").to_pylist(), view.chunks.column("parse_id").to_pylist()))

    def docs(chunk_ids: Iterable[str]) -> list[str]:
        return first_occurrence([d for c in chunk_ids if c in parse_of_chunk for d in entries[parse_of_chunk[c]]])

    return docs


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


def collection_is_cjk(collection: BeirCollection) -> bool:
    """:func:`is_cjk` over the entries' titles and texts. Over the titles alone (as it was), a Japanese
    collection with empty or English titles was scored as English: bm25s on whitespace tokens and flat
    cosine over the MiniLM vectors, which its e5-routed chunks do not have."""
    return is_cjk([f"{title}\n\n{text}" for title, text in collection.corpus.values()])


def as_free_text(query: str) -> str:
    """Benchmark questions are free text: quotes and a leading '-' must not become syntax."""
    cleaned = query.replace('"', " ")
    cleaned = re.sub(r"(^|\s)-+", r"\1", cleaned)
    cleaned = re.sub(r"\b(path|type|after|before|source):", r"\1 ", cleaned, flags=re.IGNORECASE)
    return cleaned[:1000] if cleaned.strip() else "?"
