"""The defined fallback when the serving index is unusable: a scan of canonical chunks.

Score = number of distinct positive terms and phrases whose folded text occurs
in the chunk's folded text; a chunk containing an excluded term is dropped.
Slower than the index, never silently empty.
"""

from __future__ import annotations

from fabric_query.channels import ChannelResult, ranked
from fabric_query.querylang import ParsedQuery
from fabric_query.release import ReleaseView
from fabric_resources.text_folding import fold


def scan_channel(view: ReleaseView, parsed: ParsedQuery, eligible: set[str] | None, depth: int) -> ChannelResult:
    wanted = [fold(t) for t in dict.fromkeys((*parsed.terms, *parsed.phrases)) if t.strip()]
    required = [fold(p) for p in parsed.phrases]
    banned = [fold(t) for t in parsed.excluded if t.strip()]
    ids = view.chunks.column("chunk_id").to_pylist()
    texts = view.chunks.column("text").to_pylist()
    pids = view.chunk_parse_ids
    pairs = []
    for i, (cid, text) in enumerate(zip(ids, texts)):
        if eligible is not None and pids[i] not in eligible:
            continue
        folded = fold(text)
        if any(b in folded for b in banned) or not all(r in folded for r in required):
            continue
        score = sum(1 for w in wanted if w in folded)
        if score:
            pairs.append((cid, float(score)))
    return ranked(pairs, depth)
