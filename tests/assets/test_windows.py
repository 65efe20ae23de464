"""Context and ColBERT windows: the pure packer (fabric_assets.chunking.windows), the
coverage verdict (fabric_assets.gate.windows_cover_chunks) and the two assets end to end."""

from __future__ import annotations

import pyarrow as pa
import pytest

from fabric_resources.config import colbert_window_cap
from conftest import ingest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_assets.chunking.windows import (
    WindowMember,
    WindowPackingError,
    build_windows,
    min_fill_tokens,
    pack_windows,
    window_members,
    window_policy,
)
from fabric_assets.gate import windows_cover_chunks
from fabric_assets.projections import REQUIRED_VERDICTS
from fabric_resources.identity import text_hash
from fabric_resources.schema import CHUNKS, FRAGMENT_SEPARATOR

PARSE = "ab" * 16
CHUNKER = "fine-v1:test:max8"


def member(i: int, tokens: int, section: tuple[str, ...] = ()) -> WindowMember:
    frag = {"unit_id": f"u{i}", "start_char": 0, "end_char": 3 + i, "start_utf16": 0, "end_utf16": 3 + i}
    return WindowMember(f"c{i:04d}", i, f"t{i}" + "x" * (1 + i), (frag,), section or (f"s{i}",), tokens)


def chunk_table(members: list[WindowMember], parse_id: str = PARSE, chunker: str = CHUNKER) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"parse_id": parse_id, "chunk_id": m.chunk_id, "ordinal": m.ordinal, "text": m.text,
             "text_hash": text_hash(m.text), "fragments": [dict(f) for f in m.fragments],
             "section_path": list(m.section_path), "token_count": m.token_count, "chunker": chunker}
            for m in members
        ],
        schema=CHUNKS,
    )


@st.composite
def valid_packings(draw):
    """A cap, a fill ratio and chunk token counts that config validation admits
    (every chunk <= cap - floor(cap * ratio))."""
    cap = draw(st.integers(min_value=1, max_value=40))
    ratio = draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9]))
    largest = cap - min_fill_tokens(cap, ratio)
    counts = draw(st.lists(st.integers(min_value=1, max_value=largest), max_size=40))
    return cap, ratio, [member(i, n) for i, n in enumerate(counts)]


def assert_packing_laws(members: list[WindowMember], windows, cap: int, ratio: float) -> None:
    floor_tokens = min_fill_tokens(cap, ratio)
    # Coverage exactly once, in reading order, whole chunks (the very input objects: no split).
    flat = [m for w in windows for m in w.members]
    assert len(flat) == len(members) and all(a is b for a, b in zip(flat, members))
    assert [w.ordinal for w in windows] == list(range(len(windows)))
    for w in windows:
        assert w.members, "empty window"
        assert w.token_count == sum(m.token_count for m in w.members) <= cap
        assert w.text == FRAGMENT_SEPARATOR.join(m.text for m in w.members)
        assert list(w.fragments) == [f for m in w.members for f in m.fragments]
        assert w.section_path == w.members[0].section_path
    for a, b in zip(windows, windows[1:]):
        # Greedy: a window closes only because the next chunk would overflow it.
        assert a.token_count + b.members[0].token_count > cap
        # Only the last window may stay below the minimum fill.
        assert a.token_count >= floor_tokens
    if len(windows) >= 2 and windows[-1].token_count < floor_tokens:
        # Minimum-fill merge: a sub-minimum final window stays only when merging would overflow.
        assert windows[-1].token_count + windows[-2].token_count > cap


@settings(max_examples=300, deadline=None)
@given(valid_packings())
def test_packing_laws_hold_for_every_valid_input(packing):
    cap, ratio, members = packing
    assert_packing_laws(members, pack_windows(members, cap, ratio), cap, ratio)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=30), st.sampled_from([0.0, 0.25, 0.5, 0.9]),
       st.lists(st.integers(min_value=0, max_value=60), max_size=30))
def test_arbitrary_chunks_either_pack_lawfully_or_raise_the_typed_error(cap, ratio, counts):
    members = [member(i, n) for i, n in enumerate(counts)]
    try:
        windows = pack_windows(members, cap, ratio)
    except WindowPackingError as exc:
        assert exc.chunk_id in {m.chunk_id for m in members}
        assert exc.open_tokens + exc.token_count > cap
        return
    assert all(n <= cap for n in counts), "a chunk over the cap must raise"
    assert_packing_laws(members, windows, cap, ratio)


def test_a_window_filled_exactly_to_the_cap_is_not_closed_early():
    """guards against: closing a window at ``>= cap`` instead of ``> cap`` (off by one)."""
    windows = pack_windows([member(0, 2), member(1, 2), member(2, 1)], 4, 0.25)
    assert [w.chunk_ids for w in windows] == [("c0000", "c0001"), ("c0002",)]
    assert [w.token_count for w in windows] == [4, 1]


def test_chunk_that_would_need_a_split_raises_instead_of_leaving_a_small_window():
    """guards against: opening a new window when the open one is still below the minimum
    (a sub-minimum window mid-document) or splitting the chunk."""
    with pytest.raises(WindowPackingError) as err:
        pack_windows([member(0, 3), member(1, 8)], 10, 0.5)  # floor 5: 3 < 5 and 3 + 8 > 10
    assert err.value.chunk_id == "c0001" and err.value.min_tokens == 5
    with pytest.raises(WindowPackingError):
        pack_windows([member(0, 11)], 10, 0.0)
    # The same chunks pack once the open window has reached the minimum.
    assert len(pack_windows([member(0, 5), member(1, 8)], 10, 0.5)) == 2


def test_out_of_order_chunks_are_refused():
    with pytest.raises(ValueError, match="reading order"):
        pack_windows([member(1, 1), member(0, 1)], 10, 0.25)


def test_rows_ids_and_policy():
    members = [member(i, n) for i, n in enumerate([3, 4, 2, 5, 1])]
    table = chunk_table(members)
    rows = build_windows(PARSE, table, "context", 8, 0.25)
    assert rows.column("chunk_ids").to_pylist() == [["c0000", "c0001"], ["c0002", "c0003", "c0004"]]
    assert set(rows.column("policy").to_pylist()) == {"context-v1:max8:fill0.25:" + CHUNKER}
    assert windows_cover_chunks(rows, table, 8)["passed"]
    # Chunk rows arrive in any order; windows follow ordinals.
    shuffled = table.take([3, 0, 4, 2, 1])
    assert build_windows(PARSE, shuffled, "context", 8, 0.25).equals(rows)
    # IDs are deterministic, and differ by grain, cap and text.
    ids = rows.column("window_id").to_pylist()
    assert len(set(ids)) == 2
    assert build_windows(PARSE, table, "context", 8, 0.25).column("window_id").to_pylist() == ids
    assert not set(ids) & set(build_windows(PARSE, table, "colbert", 8, 0.25).column("window_id").to_pylist())
    assert not set(ids) & set(build_windows(PARSE, table, "context", 9, 0.25).column("window_id").to_pylist())
    assert window_policy("colbert", 256, 0.1, "x") == "colbert-v1:max256:fill0.1:x"
    assert build_windows(PARSE, table.slice(0, 0), "context", 8, 0.25).num_rows == 0
    with pytest.raises(ValueError, match="chunkers"):
        window_members(pa.concat_tables([table.slice(0, 2), chunk_table(members[2:], chunker="other")]))


def _mutated(rows: pa.Table, column: str, index: int, value) -> pa.Table:
    values = rows.column(column).to_pylist()
    values[index] = value
    return rows.set_column(rows.schema.get_field_index(column), column, pa.array(values, rows.schema.field(column).type))


def test_coverage_verdict_catches_each_broken_window():
    """guards against: a verdict that passes windows which drop, repeat or reorder chunks,
    or whose text, fragments, section path, hash or token count do not follow their members."""
    members = [member(i, n) for i, n in enumerate([3, 4, 2, 5, 1])]
    chunks = chunk_table(members)
    rows = build_windows(PARSE, chunks, "context", 8, 0.25)
    assert windows_cover_chunks(rows, chunks, 8)["passed"]
    broken = {
        "dropped chunk": _mutated(rows, "chunk_ids", 1, ["c0002", "c0003"]),
        "repeated chunk": _mutated(rows, "chunk_ids", 1, ["c0001", "c0002", "c0003", "c0004"]),
        "reordered": _mutated(rows, "chunk_ids", 0, ["c0001", "c0000"]),
        "text": _mutated(rows, "text", 0, rows.column("text")[0].as_py() + " "),
        "fragments": _mutated(rows, "fragments", 0, rows.column("fragments")[0].as_py()[:1]),
        "section": _mutated(rows, "section_path", 1, ["s3"]),
        "hash": _mutated(rows, "text_hash", 0, "0" * 64),
        "token sum": _mutated(rows, "token_count", 0, 6),
        "ordinals": _mutated(rows, "ordinal", 1, 2),
    }
    for what, table in broken.items():
        assert not windows_cover_chunks(table, chunks, 8)["passed"], what
    assert not windows_cover_chunks(rows, chunks, 7)["passed"], "window over the cap"
    assert not windows_cover_chunks(rows.slice(0, 1), chunks, 8)["passed"], "missing window"
    assert "context_windows_cover_chunks" in REQUIRED_VERDICTS and "colbert_windows_cover_chunks" in REQUIRED_VERDICTS


# ---------------------------------------------------------------------------
# End to end: real Dagster runs, Lance tables, the real tokenizer.
# ---------------------------------------------------------------------------

_TOPICS = ["tide", "lantern", "harbour", "gull", "ledger", "storm", "rope", "anchor", "pier", "reef", "kelp", "buoy"]


def _long_document() -> str:
    return "\n\n".join(
        f"The {t} was noted in the keeper's log on day {i}. " * 6 + f"Nothing else about the {t} was written."
        for i, t in enumerate(_TOPICS)
    ) + "\n"


def test_ingest_builds_both_window_grains_and_gates_on_them(tmp_path, fabric_home):
    """guards against: windows missing for a parse, windows that do not cover its chunks, a
    grain ignoring its own cap, and the gate activating a parse without the window verdicts."""
    from fabric_query.release import release_view

    src = tmp_path / "src"
    src.mkdir()
    (src / "log.txt").write_text(_long_document(), encoding="utf-8")
    (src / "short.txt").write_text("One short line about bread.\n", encoding="utf-8")
    summary = ingest(src, fabric_home)
    assert summary.failed_runs == []
    runs = fabric_home.catalog.parse_runs()
    assert {r.status for r in runs} == {"ready"}
    cfg = fabric_home.config.indexing
    for run in runs:
        for grain, table, cap in (("context", "context_windows", cfg.context_max_tokens),
                                  ("colbert", "colbert_windows", colbert_window_cap(fabric_home.config))):
            assert run.verdicts[f"{table}_cover_chunks"]["passed"], run.verdicts[f"{table}_cover_chunks"]
            chunks = fabric_home.tables.read("chunks", parse_ids=[run.parse_id]).sort_by("ordinal").to_pydict()
            windows = fabric_home.tables.read(table, parse_ids=[run.parse_id]).sort_by("ordinal").to_pydict()
            # Checked here directly, not through the verdict under test.
            assert [c for ids in windows["chunk_ids"] for c in ids] == chunks["chunk_id"]
            assert all(n <= cap for n in windows["token_count"])
            pos = {c: i for i, c in enumerate(chunks["chunk_id"])}
            for ids, text, n in zip(windows["chunk_ids"], windows["text"], windows["token_count"]):
                assert text == FRAGMENT_SEPARATOR.join(chunks["text"][pos[c]] for c in ids)
                assert n == sum(chunks["token_count"][pos[c]] for c in ids)
            assert all(p.startswith(f"{grain}-v1:max{cap}:") for p in windows["policy"])
    long_pid = max(runs, key=lambda r: fabric_home.tables.read("chunks", parse_ids=[r.parse_id]).num_rows).parse_id
    n_chunks = fabric_home.tables.read("chunks", parse_ids=[long_pid]).num_rows
    n_context = fabric_home.tables.read("context_windows", parse_ids=[long_pid]).num_rows
    n_colbert = fabric_home.tables.read("colbert_windows", parse_ids=[long_pid]).num_rows
    assert n_chunks > n_colbert > n_context >= 1, (n_chunks, n_colbert, n_context)

    release = fabric_home.catalog.current_release()
    assert release.manifest["tables"]["context_windows"] is not None
    view = release_view(fabric_home, release)
    assert view.context_windows.num_rows == sum(
        fabric_home.tables.read("context_windows", parse_ids=[r.parse_id]).num_rows for r in runs)
    wv = view.window_vectors("chunk_vectors")
    assert wv.matrix.shape == (view.context_windows.num_rows, 384)
