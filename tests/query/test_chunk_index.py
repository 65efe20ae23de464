"""The compact chunk index of a large release view (fabric_query.release.ChunkIndex) answers as a dict."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_query.release import ChunkIndex

IDS = st.lists(st.text(alphabet=st.sampled_from("0af\x00é-"), max_size=6), unique=True, max_size=40)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(ids=IDS, probes=st.lists(st.text(alphabet=st.sampled_from("0af\x00é-"), max_size=7), max_size=20))
def test_compact_index_answers_as_the_dict(ids, probes):
    """guards against: a probe matching a stored ID it only shares a prefix or NUL padding with
    (NumPy's fixed-width bytes), a row off by the sort, an unknown ID given a row."""
    arr = pa.chunked_array([pa.array(ids[: len(ids) // 2], pa.string()), pa.array(ids[len(ids) // 2:], pa.string())])
    plain, compact = ChunkIndex(arr, compact=False), ChunkIndex(arr, compact=True)
    wanted = [*ids, *probes]
    assert [compact.get(x) for x in wanted] == [plain.get(x) for x in wanted] == [
        ids.index(x) if x in ids else None for x in wanted]
    assert compact.rows_of(wanted).tolist() == plain.rows_of(wanted).tolist()
    assert compact.rows_of(pa.array(wanted, pa.string())).tolist() == plain.rows_of(wanted).tolist()
    assert list(compact) == ids and len(compact) == len(ids)
