"""The serving index's documents: one per chunk (the substring field) and one per context window
(the word field), made from the ``lexical_documents`` rows and the ``context_windows`` projection.

Pure: :func:`index_documents` turns tables into the rows :mod:`fabric_resources.lexical_index`
writes as tantivy documents. Why windows: docs/ranking.md (a chunk holds part of a document, so
BM25 statistics per chunk never accumulated a document's evidence).
"""

from __future__ import annotations

import pyarrow as pa

#: Raw field naming a document's kind (``chunk`` or ``window``), and the stored member chunk IDs of a window.
INDEX_FIELD_KIND = "kind"
INDEX_FIELD_MEMBERS = "members"
KIND_CHUNK = "chunk"
KIND_WINDOW = "window"
#: Between the member texts of a window document (no bigram or phrase spans two members' words
#: only by accident of joining: the tokenizers split on it).
WINDOW_JOINER = "\n\n"
#: The columns of :func:`index_documents`' rows a tantivy document is made of.
DOCUMENT_COLUMNS = ["parse_id", "chunk_id", "folded_text", "kind", "members"]


_INDEX_DOCUMENTS = pa.schema([
    pa.field("parse_id", pa.string(), nullable=False),
    pa.field("chunk_id", pa.string(), nullable=False),
    pa.field("folded_text", pa.string(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
    pa.field("members", pa.list_(pa.string()), nullable=False),
])


def index_documents(documents: pa.Table, windows: pa.Table | None = None) -> pa.Table:
    """The index's documents for ``documents`` (``schema.LEXICAL_DOCUMENTS`` rows, one per chunk):
    one ``chunk`` document per row, and one ``window`` document per context window of ``windows``
    (rows with ``parse_id``, ``window_id`` and ``chunk_ids`` in reading order).

    A window's folded text is its members' folded texts joined by :data:`WINDOW_JOINER`; members
    that ``documents`` does not hold are left out (a window left with none is dropped), and a
    chunk no window covers becomes a window of its own (its ID). So every chunk is in exactly one
    window document. A table that already has a ``kind`` column is returned as it is.

    Returns
    -------
    pyarrow.Table
        Columns ``parse_id, chunk_id, folded_text, kind, members`` (``chunk_id`` is the window ID
        for a window document; ``members`` is empty for a chunk document).
    """
    if "kind" in documents.column_names:
        return documents
    cols = documents.select(["parse_id", "chunk_id", "folded_text"]).to_pydict()
    text_of = dict(zip(cols["chunk_id"], cols["folded_text"]))
    parse_of = dict(zip(cols["chunk_id"], cols["parse_id"]))
    rows = [(p, c, t, KIND_CHUNK, []) for p, c, t in zip(cols["parse_id"], cols["chunk_id"], cols["folded_text"])]
    covered: set[str] = set()
    if windows is not None and windows.num_rows:
        w = windows.select(["parse_id", "window_id", "chunk_ids"]).to_pydict()
        for pid, wid, members in zip(w["parse_id"], w["window_id"], w["chunk_ids"]):
            # A chunk of another parse or one covered already would count twice in the statistics.
            kept = [m for m in members if parse_of.get(m) == pid and m not in covered]
            if not kept:
                continue
            covered.update(kept)
            rows.append((pid, wid, WINDOW_JOINER.join(text_of[m] for m in kept), KIND_WINDOW, kept))
    for p, c, t in zip(cols["parse_id"], cols["chunk_id"], cols["folded_text"]):
        if c not in covered:
            rows.append((p, c, t, KIND_WINDOW, [c]))
    return pa.table([list(col) for col in zip(*rows)] if rows else [[] for _ in range(5)], schema=_INDEX_DOCUMENTS)
