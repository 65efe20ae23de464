"""One parse's damaged vectors cost that parse its place in the ANN index, nobody else the index.

Activation builds a release's dense index over the rows that give their parse's recorded digest
(``vector_parse_digests``) and records the parses it left out; the reader serves that index with
those parses left out (as the exact product does), and a reader that may not see such a parse is
told nothing of it. Over the hand-built corpus of ``test_dense_ann`` (40 parses, exhaustive
search settings, so the index must answer as the exact product does).
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from answers import first_difference
from test_dense_ann import EXHAUSTIVE, PARSES, PER_WINDOW, ROWS, WINDOWS, _configure, _queries, _view, _write_corpus

from fabric_assets.activation.dense_index import dense_index_records
from fabric_query.channels.dense import dense_channel
from fabric_query.dense_search import AnnSource, ExactSource, dense_source
from fabric_resources.dense_index import INDEX_NAME, VECTORS_DATASET, DenseIndexUnusable, RowsDigest
from fabric_resources.home import FabricHome
from fabric_resources.schema import CHUNK_VECTORS, DENSE_DIM
from fabric_resources.vector_digest import parse_digests, table_digest

DAMAGED = PARSES[7]
KEY = f"fs:t/{DAMAGED[:4]}.txt"


def _tables(home: FabricHome) -> dict:
    return {n: home.tables.version(n) for n in ("chunks", "chunk_vectors", "context_windows",
                                                 "chunk_vectors_multilingual")}


def _recorded(home: FabricHome) -> tuple[dict, dict]:
    """(``vector_digests``, ``vector_parse_digests``) of the rows as written."""
    rows = home.tables.read("chunk_vectors", parse_ids=PARSES)
    vectors = rows.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DENSE_DIM)
    per_parse = parse_digests(rows.column("parse_id"), rows.column("chunk_id"), rows.column("model"), vectors)
    return {"chunk_vectors": table_digest(per_parse, PARSES)}, {"chunk_vectors": dict(per_parse)}


def _rewrite(home: FabricHome, rows: pa.Table) -> None:
    home.tables.replace_partitions("chunk_vectors", [DAMAGED], rows)


@pytest.fixture
def damaged(tmp_path):
    """A home whose rows of ``DAMAGED`` changed (one float's last bit) after their digests were
    recorded: (home, recorded digests, per-parse digests, the sound rows of ``DAMAGED``)."""
    home = _configure(FabricHome(tmp_path / "home"), **EXHAUSTIVE)
    _write_corpus(home)
    digests, per_parse = _recorded(home)
    sound = home.tables.read("chunk_vectors", parse_ids=[DAMAGED])
    vectors = sound.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DENSE_DIM).copy()
    vectors[3, 11] = np.nextafter(vectors[3, 11], np.float32(2))
    _rewrite(home, pa.table({"parse_id": sound.column("parse_id"), "chunk_id": sound.column("chunk_id"),
                             "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DENSE_DIM),
                             "model": sound.column("model")}, schema=CHUNK_VECTORS))
    return home, digests, per_parse, sound


def _manifest(home: FabricHome, digests: dict, per_parse: dict, previous=None) -> dict:
    tables = _tables(home)
    return {"sources": {f"fs:t/{p[:4]}.txt": {"parse_id": p, "media_type": "text/plain"} for p in PARSES},
            "tables": tables, "vector_digests": digests, "vector_parse_digests": per_parse,
            "dense_indexes": dense_index_records(home, tables, PARSES, digests, previous,
                                                 vector_parse_digests=per_parse)}


def test_a_damaged_parse_is_left_out_of_the_index_and_the_rest_keep_it(damaged):
    """guards against: one parse's damaged vector rows costing the whole table its ANN index (the
    record ``skipped: vector-digest-mismatch``), so every reader's dense channel answered with the
    exact product and a ``dense-index-missing`` reason, a withheld parse's damage included.

    The index is built without the damaged parse (no row of it indexed) and names it; a reader who
    sees it is served by the index with that parse left out, ranking as the exact product does; a
    reader who may not see it is served by the index and told nothing."""
    home, digests, per_parse, _ = damaged
    manifest = _manifest(home, digests, per_parse)
    record = manifest["dense_indexes"]["chunk_vectors"]
    assert record["generation"] and record["left_out"] == [DAMAGED], record
    assert record["rows"] == ROWS - WINDOWS * PER_WINDOW
    path = home.dense_indexes.path("chunk_vectors", record["generation"]) / VECTORS_DATASET
    assert DAMAGED not in set(lance.dataset(str(path)).to_table(columns=["parse_id"]).column("parse_id").to_pylist())
    for hidden in (frozenset(), frozenset({KEY})):
        view = _view(home, manifest, release_id=1 + len(hidden), hidden=hidden)
        source, why = dense_source(view, "chunk_vectors", home.config.query.dense_search)
        assert isinstance(source, AnnSource) and why is None, why
        exact = ExactSource(view, "chunk_vectors")
        assert source.left_out == exact.left_out == (frozenset() if hidden else frozenset({DAMAGED}))
        for q in _queries(6, seed=9):
            ranked = dense_channel(view, q, None, 100, source=source)
            # The same chunks in the same order, cosines equal but for their last bits.
            assert first_difference(ranked, dense_channel(view, q, None, 100, source=exact)) is None
            assert ranked and all(c.split("-")[0] != DAMAGED[:4] for c, _ in ranked)


def test_an_index_that_left_a_parse_out_is_reused_until_the_parse_is_repaired(damaged):
    """guards against: activation reusing an index that left a parse out after that parse's rows
    were repaired (same row count, same release digest): the repaired parse would stay unranked;
    and (``fabric dense-index-repair``) building and publishing the same index again on every run
    while the parse is still damaged."""
    home, digests, per_parse, sound = damaged
    first = _manifest(home, digests, per_parse)["dense_indexes"]
    assert _manifest(home, digests, per_parse, previous=first)["dense_indexes"] == first
    _rewrite(home, sound)  # `fabric repair` writes the rows that were recorded
    again = _manifest(home, digests, per_parse, previous=first)["dense_indexes"]["chunk_vectors"]
    assert again["generation"] != first["chunk_vectors"]["generation"] and "left_out" not in again
    assert again["rows"] == ROWS and again["digest"] == digests["chunk_vectors"]


def test_without_per_parse_digests_a_damaged_table_gets_no_index(damaged):
    """A release that records the table digest only cannot tell which parse is damaged: no index."""
    home, digests, _, _ = damaged
    records = dense_index_records(home, _tables(home), PARSES, digests)
    assert records["chunk_vectors"] == {"generation": None, "rows": ROWS, "skipped": "vector-digest-mismatch"}



def _relabelled(tmp_path, label: str) -> tuple[FabricHome, dict, np.ndarray]:
    """A home whose index generation has its first row (a chunk of ``PARSES[0]``) labelled ``label``
    (its file rewritten, its vector index rebuilt, its meta untouched): (home, manifest, that
    row's vector)."""
    home = _configure(FabricHome(tmp_path / "home"), **EXHAUSTIVE)
    _write_corpus(home)
    digests, per_parse = _recorded(home)
    manifest = _manifest(home, digests, per_parse)
    path = home.dense_indexes.path("chunk_vectors", manifest["dense_indexes"]["chunk_vectors"]["generation"])
    t = lance.dataset(str(path / VECTORS_DATASET)).to_table()
    ids = t.column("parse_id").to_pylist()
    assert ids[0] == PARSES[0]
    ids[0] = label
    t = t.set_column(t.schema.get_field_index("parse_id"), "parse_id", pa.array(ids, pa.string()))
    ds = lance.write_dataset(t, str(path / VECTORS_DATASET), mode="overwrite")
    ds.create_index("vector", "IVF_PQ", name=INDEX_NAME, metric="cosine", num_partitions=20, num_sub_vectors=48)
    return home, manifest, t.column("vector")[0].values.to_numpy()


def test_a_row_labelled_with_a_withheld_parse_is_never_served(tmp_path):
    """guards against: an index row whose parse-ID bytes were damaged to a withheld parse's ID being
    served for its chunk, a chunk of the parse that lost the row and is left out (named to the
    reader): parses were left out by their rows' labels alone."""
    home, manifest, vector = _relabelled(tmp_path, DAMAGED)
    view = _view(home, manifest, hidden=frozenset({KEY}))
    source, why = dense_source(view, "chunk_vectors", home.config.query.dense_search)
    assert isinstance(source, AnnSource) and why is None and source.left_out == {PARSES[0]}
    ranked = dense_channel(view, vector, None, 100, source=source)
    assert ranked and all(c.split("-")[0] != PARSES[0][:4] for c, _ in ranked), ranked[:3]


def test_a_damaged_index_structure_is_named_without_a_parse_id(tmp_path):
    """guards against: an index generation with rows of a parse the release does not name, or one
    parse's rows apart, refused with ``rows of parse <ID> are not contiguous or not the release's``:
    the ID (a withheld source's, or bytes of a damaged file) reached every reader's
    ``dense_fallback_reason``. The reason names the generation and what is wrong, and no ID."""
    home, manifest, _ = _relabelled(tmp_path, "f" * 32)
    gen = manifest["dense_indexes"]["chunk_vectors"]["generation"]
    source, why = dense_source(_view(home, manifest), "chunk_vectors", home.config.query.dense_search)
    assert source.kind == "exact" and why == (f"dense-index-release-mismatch: chunk_vectors/{gen}: holds rows of a "
                                              "parse the release does not name")
    # One parse's rows in two batches with another's between (the reader streams batch by batch).
    t = lance.dataset(str(home.dense_indexes.path("chunk_vectors", gen) / VECTORS_DATASET)).to_table()
    p, q = t.slice(1, PER_WINDOW * WINDOWS - 1), t.slice(PER_WINDOW * WINDOWS, PER_WINDOW * WINDOWS)
    assert set(p.column("parse_id").to_pylist()) == {PARSES[0]} and set(q.column("parse_id").to_pylist()) == {PARSES[1]}
    digest = RowsDigest(PARSES, f"chunk_vectors/{gen}")
    with pytest.raises(DenseIndexUnusable) as caught:
        for batch in (*p.slice(0, 20).to_batches(), *q.to_batches(), *p.slice(20).to_batches()):
            digest.add(batch)
        digest.finish()
    assert caught.value.describe() == (f"dense-index-release-mismatch: chunk_vectors/{gen}: a parse's rows are not "
                                       "contiguous (a generation is sorted by parse)")
