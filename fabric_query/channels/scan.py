"""The defined fallback when the serving index is unusable: a scan of canonical chunks.

It uses the index's own analyzers in Python, so it matches what the index
would: a chunk scores one point per distinct query word token it contains
(folded, stemmed) and per query term in a script without spaces that occurs
in it exactly; required phrases must occur (folded); a chunk with an excluded
term is dropped. Slower than the index, never silently empty.
"""

from __future__ import annotations

from fabric_query.channels import ChannelResult, ranked
from fabric_query.channels.lexical import substring_tokens, word_tokens
from fabric_query.querylang import ParsedQuery
from fabric_query.release import ReleaseView
from fabric_resources.text_folding import UNSPACED


def _compact(text: str) -> str:
    return "".join(substring_tokens(text))


def scan_channel(view: ReleaseView, parsed: ParsedQuery, eligible: set[str] | None, depth: int) -> ChannelResult:
    wanted = set(word_tokens(" ".join(parsed.terms)))
    cjk_terms = {_compact(t) for t in parsed.terms if UNSPACED.search(t)} - {""}
    required = [_compact(p) for p in parsed.phrases]
    banned_words = set(word_tokens(" ".join(t for t in parsed.excluded if not UNSPACED.search(t))))
    banned_cjk = {_compact(t) for t in parsed.excluded if UNSPACED.search(t)} - {""}
    ids = view.chunks.column("chunk_id").to_pylist()
    texts = view.chunks.column("text").to_pylist()
    pids = view.chunk_parse_ids
    pairs = []
    for i, (cid, text) in enumerate(zip(ids, texts)):
        if eligible is not None and pids[i] not in eligible:
            continue
        tokens = set(word_tokens(text))
        compact = _compact(text)
        if tokens & banned_words or any(b in compact for b in banned_cjk):
            continue
        if not all(r in compact for r in required):
            continue
        score = len(tokens & wanted) + sum(1 for t in cjk_terms if t in compact) + len(required)
        if score:
            pairs.append((cid, float(score)))
    return ranked(pairs, depth)
