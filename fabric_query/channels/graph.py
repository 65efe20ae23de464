# Over 500 lines: the channel, its entity matching and its release graph read one set of rows together.
"""The graph channel: entity names in the query, one hop over relation edges, and annotation
embeddings — three routes fused into ONE grouped ranking of chunk IDs (seed 003, section 6:
"grouped graph plus semantic annotations" is one contribution to the outer RRF).

Everything is read from the pinned release: ``graph_mentions``, ``graph_edges``,
``annotations`` and ``annotation_vectors`` at the table versions its manifest recorded, and
only rows of the parses active in it. A parse that left the release therefore contributes no
entity, edge or annotation, and an entity no active parse supports cannot match (withdrawal is
structural; nothing is recomputed). Filters apply before any route ranks: rows of ineligible
parses never enter matching.

Routes (each ranks chunk IDs; a matched item reaches the chunks whose fragments overlap one of
its support spans — same parse, same unit, overlapping Unicode scalar ranges):

``entity``
    Entity keys found in the query (:func:`entity_matches`), then their mentions. Order: number
    of distinct matched entities in the chunk (desc), best match class (exact < acronym <
    token_prefix), longest matched key (desc), chunk ID.
``hop``
    Edges incident to a matched entity (as subject or object), one hop: the edge's support
    spans (tier 0) and the mentions of the entity at its other end in the edge's own parse
    (tier 1; traversal stays within one parse). Order: tier, number of edges (desc), chunk ID.
``annotation``
    Cosine of the query vector with summary and relation vectors, the ``depth`` best
    annotations; a chunk scores its best annotation's cosine. Order: cosine (desc), chunk ID.

The three lists are fused by :func:`fabric_query.fusion.rrf` (``config.query.rrf_k``, equal
weights) and cut to ``depth``.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_query.channels.base import ChannelResult, ChannelRun, RunsInTurn
from fabric_query.channels.dense import DENSE, query_vector
from fabric_query.channels.function_words import english_function_words
from fabric_query.fusion import rrf
from fabric_query.release import ProjectionUnavailable, ReleaseView
from fabric_resources.config import EntityMatchConfig, FabricConfig
from fabric_resources.schema import DENSE_DIM
from fabric_resources.text_folding import UNSPACED, normalise_entity_name

if TYPE_CHECKING:
    from fabric_query.context import QueryContext

MatchClass = Literal["exact", "acronym", "token_prefix"]
Route = Literal["entity", "hop", "annotation"]

#: Rank of each match class (lower is better), seed 003 section 6: Exact < Acronym < TokenPrefix.
CLASS_ORDER: dict[str, int] = {"exact": 0, "acronym": 1, "token_prefix": 2}
ROUTES: tuple[Route, ...] = ("entity", "hop", "annotation")

#: An acronym matches only names of at least this many tokens (seed 003 ``min_name_tokens``; a
#: one-token name's "acronym" is a single letter, which would match any one-letter query token).
ACRONYM_MIN_NAME_TOKENS = 2
#: Fuzzy (acronym + token-prefix) matches kept per query, best first (seed 003
#: ``max_fuzzy_candidates``; the seed gives no value — 32 bounds the fan-out of one query).
MAX_FUZZY_CANDIDATES = 32
#: A name in a script written without spaces (``UNSPACED``) matches as a substring of the
#: normalised query when it has at least this many characters (one Han character would match
#: almost any Chinese or Japanese query).
MIN_UNSPACED_NAME_CHARS = 2

_MENTION_COLS = ["parse_id", "entity_key", "name", "entity_type", "annotation_id", "support"]
_EDGE_COLS = ["parse_id", "edge_id", "subject_key", "predicate", "object_key", "annotation_id", "support"]
_ANNOTATION_COLS = ["parse_id", "annotation_id", "kind", "text", "support"]


@dataclass(frozen=True)
class EntityMatch:
    """One stored entity key found in the query."""

    key: str
    match: MatchClass


def _tokens(key: str) -> tuple[str, ...]:
    return tuple(key.split(" ")) if key else ()


def entity_matches(query_text: str, keys: Container[str], entity_match: EntityMatchConfig,
                   acronyms: dict[str, list[str]] | None = None,
                   first_tokens: list[tuple[str, str]] | None = None,
                   unspaced: dict[str, list[str]] | None = None,
                   longest: int | None = None) -> list[EntityMatch]:
    """Stored entity ``keys`` (normalised names) that the query names, best first.

    * exact (always): the key's tokens occur as consecutive tokens of the normalised query
      (:func:`~fabric_resources.text_folding.normalise_entity_name`); a key written in a script
      without spaces (``UNSPACED``) of at least ``MIN_UNSPACED_NAME_CHARS`` characters matches
      as a substring of the normalised query; a key of English function words only
      (:func:`~fabric_query.channels.function_words.english_function_words`) only when it is
      the whole normalised query;
    * acronym (``entity_match.acronyms``): one query token (>= 2 characters, no function word)
      equals the first-letter acronym of a key of >= ``ACRONYM_MIN_NAME_TOKENS`` tokens;
    * token_prefix (``entity_match.token_prefix``): consecutive query tokens, as many as the
      key has, each a leading prefix of the key token in the same position — tokens shorter
      than ``entity_match.min_prefix_chars`` must be equal — and not all equal.

    Fuzzy matches are capped at ``MAX_FUZZY_CANDIDATES``. With both fuzzy classes off, stored
    names are never enumerated (only query n-grams are looked up). ``acronyms`` (acronym →
    keys), ``first_tokens`` (:func:`first_token_index`), ``unspaced``
    (:func:`unspaced_key_index`) and ``longest`` (the most tokens of any key) may be passed
    precomputed over a superset of ``keys``; when all four are given, ``keys`` is only asked
    ``in`` (it may be any container) and no stored key is enumerated per query. Order: class,
    key length (desc), key.

    >>> cfg = EntityMatchConfig(acronyms=True, token_prefix=True)
    >>> keys = {"ada lovelace", "analytical engine", "charles babbage"}
    >>> [(m.key, m.match) for m in entity_matches("Ada Lovelace on the AE, with Charl Babbage", keys, cfg)]
    [('ada lovelace', 'exact'), ('analytical engine', 'acronym'), ('charles babbage', 'token_prefix')]
    >>> entity_matches("the AE", keys, EntityMatchConfig())
    []
    """
    q = normalise_entity_name(query_text)
    qt = _tokens(q)
    found: dict[str, MatchClass] = {}
    if qt:
        if longest is None:
            longest = max((len(_tokens(k)) for k in keys), default=0)
        for n in range(1, min(longest, len(qt)) + 1):
            for i in range(len(qt) - n + 1):
                gram = " ".join(qt[i:i + n])
                if gram in keys:
                    found[gram] = "exact"
        # Keys written without spaces are found through their first characters, each distinct
        # pair of the query's characters looked up once: testing every stored key against the
        # query cost 70 ms a query at 120,000 keys, whatever the query; looking up every position
        # walked one crowded bucket once per repeat (50,000 keys starting 東京 × a query of
        # 1,000 東京 took 4.4 s).
        table = unspaced if unspaced is not None else unspaced_key_index(keys)
        width = MIN_UNSPACED_NAME_CHARS
        for gram in {q[i:i + width] for i in range(len(q) - width + 1)}:
            for k in table.get(gram, ()):
                if k not in found and k in q and k in keys:
                    found[k] = "exact"
    # A name of function words only ("the", "what", "of it") is grounded in almost any English text
    # and named by almost any English question: a reply (or a document's text steering the model)
    # listing them made one document an entity match for every question. Such a name matches only
    # a query that is exactly it; no function word is an acronym either ("is": "internet service").
    function = english_function_words()
    for k in [k for k in found if k != q and all(t in function for t in _tokens(k))]:
        del found[k]
    fuzzy: dict[str, MatchClass] = {}
    if entity_match.acronyms and qt:
        table = acronyms if acronyms is not None else acronym_table(keys)
        for t in set(qt):
            if len(t) >= 2 and t not in function:
                for k in table.get(t, ()):
                    if k in keys and k not in found:  # the table may hold keys a filter excludes
                        fuzzy.setdefault(k, "acronym")
    if entity_match.token_prefix and qt:
        # Only keys whose first token the query token at i is a prefix of can match at i: looked up
        # in the sorted first-token index, not by trying every key at every query position (100,000
        # keys × a 1,000-character query took over a minute).
        index = first_tokens if first_tokens is not None else first_token_index(keys)
        firsts = [f for f, _ in index]
        mpc = entity_match.min_prefix_chars
        for i, a0 in enumerate(qt):
            j = bisect.bisect_left(firsts, a0)
            while j < len(index) and index[j][0].startswith(a0) and (len(a0) >= mpc or index[j][0] == a0):
                k = index[j][1]
                j += 1
                if k in found or k in fuzzy or k not in keys:
                    continue
                kt = _tokens(k)
                window = qt[i:i + len(kt)]
                if len(window) == len(kt) and window != kt and all(
                    (len(a) >= mpc and b.startswith(a)) or a == b for a, b in zip(window, kt)
                ):
                    fuzzy[k] = "token_prefix"
    order = lambda m: (CLASS_ORDER[m.match], -len(m.key), m.key)  # noqa: E731
    exact = sorted((EntityMatch(k, c) for k, c in found.items()), key=order)
    fuzzy_sorted = sorted((EntityMatch(k, c) for k, c in fuzzy.items()), key=order)[:MAX_FUZZY_CANDIDATES]
    return exact + fuzzy_sorted


def unspaced_key_index(keys: Iterable[str]) -> dict[str, list[str]]:
    """First ``MIN_UNSPACED_NAME_CHARS`` characters → the keys of at least that many characters
    holding a character of a script written without spaces (``UNSPACED``): the keys that match
    as a substring of the query, looked up where they start."""
    out: dict[str, list[str]] = {}
    for k in keys:
        if len(k) >= MIN_UNSPACED_NAME_CHARS and UNSPACED.search(k):
            out.setdefault(k[:MIN_UNSPACED_NAME_CHARS], []).append(k)
    return out


def first_token_index(keys: set[str]) -> list[tuple[str, str]]:
    """``(first token, key)`` of every key, sorted: the token-prefix class's lookup (a query token
    finds the keys whose first token it starts by bisection)."""
    return sorted((k.split(" ", 1)[0], k) for k in keys if k)


def acronym_table(keys: set[str]) -> dict[str, list[str]]:
    """First-letter acronym → keys with at least ``ACRONYM_MIN_NAME_TOKENS`` tokens (sorted)."""
    out: dict[str, list[str]] = {}
    for k in sorted(keys):
        kt = _tokens(k)
        if len(kt) >= ACRONYM_MIN_NAME_TOKENS:
            out.setdefault("".join(t[0] for t in kt), []).append(k)
    return out


@dataclass
class ReleaseGraph:
    """The graph rows of one release's active parses, at its pinned table versions.

    ``mentions``, ``edges``: ``GRAPH_MENTIONS`` / ``GRAPH_EDGES`` rows as dicts;
    ``annotations``: annotation ID → ``{parse_id, kind, text, support}`` (summary and relation
    rows); ``vector_ids`` / ``vector_parse_ids`` / ``vectors`` (``(n, 384) float32``) /
    ``vector_models``: the annotation-embedding rows.
    """

    view: ReleaseView
    mentions: list[dict]
    edges: list[dict]
    annotations: dict[str, dict]
    vector_ids: list[str]
    vector_parse_ids: np.ndarray
    vectors: np.ndarray
    vector_models: list[str]

    @classmethod
    def load(cls, view: ReleaseView) -> "ReleaseGraph":
        # Reads of the view's (visible) parses; an unreadable table raises ProjectionUnavailable.
        mentions = view.read_active("graph_mentions", _MENTION_COLS)
        edges = view.read_active("graph_edges", _EDGE_COLS)
        ann = view.read_active("annotations", _ANNOTATION_COLS)
        ann = ann.filter(pc.is_in(ann.column("kind"), pa.array(["summary", "relation"])))
        vec = view.read_active("annotation_vectors", ["parse_id", "annotation_id", "vector", "model"])
        if vec.num_rows:
            matrix = vec.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            matrix = np.ascontiguousarray(matrix.reshape(vec.num_rows, DENSE_DIM), dtype=np.float32)
        else:
            matrix = np.zeros((0, DENSE_DIM), dtype=np.float32)
        return cls(
            view=view,
            mentions=mentions.to_pylist(),
            edges=edges.to_pylist(),
            annotations={r["annotation_id"]: r for r in ann.to_pylist()},
            vector_ids=vec.column("annotation_id").to_pylist(),
            vector_parse_ids=np.array(vec.column("parse_id").to_pylist(), dtype=object),
            vectors=matrix,
            vector_models=vec.column("model").to_pylist(),
        )

    # -- indexes, built on first use --------------------------------------------------------
    @cached_property
    def mentions_by_key(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, m in enumerate(self.mentions):
            out.setdefault(m["entity_key"], []).append(i)
        return out

    @cached_property
    def mentions_by_parse_key(self) -> dict[tuple[str, str], list[int]]:
        out: dict[tuple[str, str], list[int]] = {}
        for i, m in enumerate(self.mentions):
            out.setdefault((m["parse_id"], m["entity_key"]), []).append(i)
        return out

    @cached_property
    def edges_by_key(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, e in enumerate(self.edges):
            out.setdefault(e["subject_key"], []).append(i)
            if e["object_key"] != e["subject_key"]:
                out.setdefault(e["object_key"], []).append(i)
        return out

    @cached_property
    def acronyms(self) -> dict[str, list[str]]:
        return acronym_table(set(self.mentions_by_key))

    @cached_property
    def first_tokens(self) -> list[tuple[str, str]]:
        return first_token_index(set(self.mentions_by_key))

    @cached_property
    def unspaced(self) -> dict[str, list[str]]:
        return unspaced_key_index(self.mentions_by_key)

    @cached_property
    def longest_key(self) -> int:
        return max((len(_tokens(k)) for k in self.mentions_by_key), default=0)

    def admitted_keys(self, ok) -> Container[str]:
        """The keys with a mention in a parse ``ok`` admits, asked one key at a time (a filtered
        query used to build this set from every mention of the release)."""
        graph = self

        class _Admitted:
            def __contains__(self, key: object) -> bool:
                idx = graph.mentions_by_key.get(key)  # type: ignore[arg-type]
                return idx is not None and any(ok(graph.mentions[i]["parse_id"]) for i in idx)

        return _Admitted()

    @cached_property
    def fragments(self) -> dict[tuple[str, str], tuple[list[int], list[int], list[str]]]:
        """(parse_id, unit_id) → (starts, ends, chunk_ids) of the release's chunk fragments, by start."""
        chunks = self.view.chunks
        acc: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        for pid, cid, frags in zip(chunks.column("parse_id").to_pylist(), chunks.column("chunk_id").to_pylist(),
                                   self.view.chunk_fragments):
            for f in frags:
                acc.setdefault((pid, f["unit_id"]), []).append((f["start_char"], f["end_char"], cid))
        out = {}
        for k, rows in acc.items():
            rows.sort()
            out[k] = ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
        return out

    def chunks_for(self, parse_id: str, span: dict) -> list[str]:
        """Chunk IDs of ``parse_id`` whose fragments overlap ``span`` (a ``SUPPORT`` dict).

        Ranges are end-exclusive; an empty span overlaps the fragment that contains its point.
        """
        entry = self.fragments.get((parse_id, span["unit_id"]))
        if entry is None:
            return []
        starts, ends, ids = entry
        s, e = span["start_char"], span["end_char"]
        out = []
        # Fragments of one unit are disjoint and sorted: start at the first whose end lies after s.
        for j in range(bisect.bisect_right(ends, s), len(ids)):
            if starts[j] >= max(e, s + 1):
                break
            out.append(ids[j])
        return out


_GRAPHS: OrderedDict[tuple, ReleaseGraph] = OrderedDict()
_GRAPHS_LOCK = threading.Lock()
#: Release graphs kept per process (like ``fabric_query.release.MAX_CACHED_VIEWS``).
MAX_CACHED_GRAPHS = 4


def release_graph(view: ReleaseView) -> ReleaseGraph:
    """The graph of ``view``'s release, loaded once per view (home, release, hidden sources) in this process."""
    key = view.cache_key
    with _GRAPHS_LOCK:
        graph = _GRAPHS.get(key)
        if graph is not None:
            _GRAPHS.move_to_end(key)
            return graph
    graph = ReleaseGraph.load(view)
    with _GRAPHS_LOCK:
        graph = _GRAPHS.setdefault(key, graph)
        while len(_GRAPHS) > MAX_CACHED_GRAPHS:
            _GRAPHS.popitem(last=False)
    return graph


@dataclass
class _Evidence:
    """What reached one chunk, accumulated over the routes (becomes its provenance)."""

    entities: dict[tuple[str, str], str] = field(default_factory=dict)  # (key, name) → match class
    edges: dict[str, dict] = field(default_factory=dict)  # annotation_id → edge summary
    annotations: dict[str, tuple[str, float]] = field(default_factory=dict)  # annotation_id → (kind, cosine)
    annotation_ids: set[str] = field(default_factory=set)
    support: set[tuple] = field(default_factory=set)

    def add_support(self, parse_id: str, span: dict) -> None:
        self.support.add((parse_id, span["unit_id"], span["start_char"], span["end_char"],
                          span["start_utf16"], span["end_utf16"], span["text_hash"]))

    def as_dict(self) -> dict:
        return {
            "routes": [],
            "entities": [{"entity_key": k, "name": n, "match": c} for (k, n), c in sorted(self.entities.items())],
            "predicates": sorted({e["predicate"] for e in self.edges.values()}),
            "edges": [self.edges[a] for a in sorted(self.edges)],
            "annotations": [{"annotation_id": a, "kind": k, "score": round(s, 6)}
                            for a, (k, s) in sorted(self.annotations.items())],
            "annotation_ids": sorted(self.annotation_ids),
            "support": [dict(zip(("parse_id", "unit_id", "start_char", "end_char", "start_utf16", "end_utf16",
                                  "text_hash"), s)) for s in sorted(self.support)],
        }


def graph_channel(
    view: ReleaseView,
    parsed_query_text: str,
    query_vector: np.ndarray | None,
    eligible: set[str] | None,
    depth: int,
    config: FabricConfig,
    *,
    query_model: str | None = None,
) -> tuple[ChannelResult, dict[str, dict]]:
    """One grouped ranking of chunk IDs from the entity, hop and annotation routes.

    Parameters
    ----------
    view
        The pinned release.
    parsed_query_text
        The query's positive text (``ParsedQuery.positive_text``: terms and phrases).
    query_vector
        ``(384,) float32`` unit-norm, from the model recorded on the ``annotation_vectors`` rows
        (the dense embedder); ``None`` skips the annotation route.
    eligible
        Parse IDs admitted by the query's filters (``None`` = every active parse); rows of other
        parses never enter any route.
    depth
        Each route and the fused list are cut to ``depth``.
    config
        ``config.annotation.entity_match`` selects the fuzzy classes; ``config.query.rrf_k``.
    query_model
        Identity of the model that encoded ``query_vector``; when given, only annotation vectors
        recorded with that model are scored (vectors of two models are not comparable).

    Returns
    -------
    ranking : list[tuple[str, float]]
        ``(chunk_id, rrf_score)`` best first (ties: best single-route rank, then chunk ID).
    provenance : dict[str, dict]
        For each ranked chunk: ``routes`` (subset of entity/hop/annotation, in that order),
        ``entities`` (``entity_key``, ``name`` as written, ``match`` class), ``predicates``,
        ``edges`` (``edge_id``, ``subject_key``, ``predicate``, ``object_key``,
        ``annotation_id``, ``parse_id``), ``annotations`` (``annotation_id``, ``kind``,
        cosine ``score``), ``annotation_ids`` (every annotation that reached the chunk) and
        ``support`` (the support spans that overlap the chunk: ``parse_id``, ``unit_id``,
        Unicode scalar and UTF-16 offsets, end-exclusive, ``text_hash``). JSON-ready.
    """
    graph = release_graph(view)
    ok = (lambda p: True) if eligible is None else (lambda p: p in eligible)  # noqa: E731
    evidence: dict[str, _Evidence] = {}
    keys = graph.mentions_by_key if eligible is None else graph.admitted_keys(ok)
    em = config.annotation.entity_match
    matches = entity_matches(parsed_query_text, keys, em, graph.acronyms if em.acronyms else None,
                             graph.first_tokens if em.token_prefix else None, graph.unspaced, graph.longest_key)
    rankings = {
        "entity": _entity_route(graph, matches, ok, evidence)[:depth],
        "hop": _hop_route(graph, matches, ok, evidence)[:depth],
        "annotation": (_annotation_route(graph, query_vector, eligible, query_model, depth, evidence)[:depth]
                       if query_vector is not None else []),
    }
    rankings = {name: ids for name, ids in rankings.items() if ids}
    fused = rrf(rankings, config.query.rrf_k)[:depth] if rankings else []
    members = {name: set(ids) for name, ids in rankings.items()}
    provenance = {}
    for cid, _ in fused:
        provenance[cid] = evidence[cid].as_dict()
        # A route counts where the chunk made that route's cut list.
        provenance[cid]["routes"] = [r for r in ROUTES if cid in members.get(r, ())]
    return fused, provenance


def _entity_route(graph: ReleaseGraph, matches: list[EntityMatch], ok, evidence: dict[str, _Evidence]) -> list[str]:
    """Chunks holding mentions of matched entities: most distinct entities, best class, longest key."""
    stats: dict[str, tuple[set[str], int, int]] = {}  # chunk → (keys, best class, longest key)
    for m in matches:
        for i in graph.mentions_by_key[m.key]:
            row = graph.mentions[i]
            if not ok(row["parse_id"]):
                continue
            for span in row["support"]:
                for cid in graph.chunks_for(row["parse_id"], span):
                    e = evidence.setdefault(cid, _Evidence())
                    e.entities[(m.key, row["name"])] = m.match
                    e.annotation_ids.add(row["annotation_id"])
                    e.add_support(row["parse_id"], span)
                    ks, best, longest = stats.get(cid, (set(), len(CLASS_ORDER), 0))
                    ks.add(m.key)
                    stats[cid] = (ks, min(best, CLASS_ORDER[m.match]), max(longest, len(m.key)))
    return sorted(stats, key=lambda c: (-len(stats[c][0]), stats[c][1], -stats[c][2], c))


def _hop_route(graph: ReleaseGraph, matches: list[EntityMatch], ok, evidence: dict[str, _Evidence]) -> list[str]:
    """One hop over edges incident to a matched entity, within each edge's parse: the edge's
    support (tier 0), then mentions of the entity at its other end (tier 1); more edges first."""
    matched = {m.key for m in matches}
    stats: dict[str, tuple[int, set[str]]] = {}  # chunk → (best tier, edges' annotation IDs)
    seen: set[int] = set()
    for m in matches:
        for i in graph.edges_by_key.get(m.key, ()):
            row = graph.edges[i]
            if i in seen or not ok(row["parse_id"]):
                continue
            seen.add(i)
            pid = row["parse_id"]
            edge = {"edge_id": row["edge_id"], "subject_key": row["subject_key"], "predicate": row["predicate"],
                    "object_key": row["object_key"], "annotation_id": row["annotation_id"], "parse_id": pid}
            reached = [(0, span, None) for span in row["support"]]
            other = row["object_key"] if row["subject_key"] in matched else row["subject_key"]
            if other not in matched:  # a matched neighbour reaches its own chunks in the entity route
                for j in graph.mentions_by_parse_key.get((pid, other), ()):
                    reached += [(1, span, graph.mentions[j]) for span in graph.mentions[j]["support"]]
            for tier, span, mention in reached:
                for cid in graph.chunks_for(pid, span):
                    e = evidence.setdefault(cid, _Evidence())
                    e.edges[row["annotation_id"]] = edge
                    e.annotation_ids.add(row["annotation_id"])
                    if mention is not None:
                        e.annotation_ids.add(mention["annotation_id"])
                    e.add_support(pid, span)
                    t, edges = stats.get(cid, (1, set()))
                    edges.add(row["annotation_id"])
                    stats[cid] = (min(t, tier), edges)
    return sorted(stats, key=lambda c: (stats[c][0], -len(stats[c][1]), c))


def _annotation_route(graph: ReleaseGraph, query_vector: np.ndarray, eligible: set[str] | None,
                      query_model: str | None, depth: int, evidence: dict[str, _Evidence]) -> list[str]:
    """The ``depth`` summary/relation annotations nearest the query (cosine; ties by annotation
    ID), mapped to their supporting chunks; a chunk scores its best annotation."""
    if graph.vectors.shape[0] == 0:
        return []
    scores = graph.vectors @ np.asarray(query_vector, dtype=np.float32)
    admitted = np.ones(len(scores), dtype=bool)
    if eligible is not None:
        admitted &= np.fromiter((p in eligible for p in graph.vector_parse_ids), dtype=bool, count=len(scores))
    if query_model is not None:
        admitted &= np.fromiter((m == query_model for m in graph.vector_models), dtype=bool, count=len(scores))
    best: dict[str, float] = {}
    top = sorted(np.flatnonzero(admitted).tolist(), key=lambda i: (-float(scores[i]), graph.vector_ids[i]))[:depth]
    for i in top:
        aid, s = graph.vector_ids[i], float(scores[i])
        row = graph.annotations.get(aid)
        if row is None:  # a vector without its annotation row (tables pinned mid-write)
            continue
        for span in row["support"]:
            for cid in graph.chunks_for(row["parse_id"], span):
                e = evidence.setdefault(cid, _Evidence())
                e.annotations[aid] = (row["kind"], s)
                e.annotation_ids.add(aid)
                e.add_support(row["parse_id"], span)
                best[cid] = max(best.get(cid, -np.inf), s)
    return sorted(best, key=lambda c: (-best[c], c))


class GraphChannel(RunsInTurn):
    """The ``graph`` channel (:func:`graph_channel`), run when annotation is on."""

    name = "graph"
    stage = "graph"
    hard_constraint_carrier = False  # entities and annotations do not prove a phrase or an exclusion
    fallback = None

    def applies(self, ctx: "QueryContext") -> bool:
        return ctx.config.annotation.enabled

    def run(self, ctx: "QueryContext") -> ChannelRun:
        # Annotation vectors are written by the dense role's model: only that route's query vector
        # (when its own table accepts it) is compared with them.
        qv = query_vector(ctx, DENSE) if DENSE.applies(ctx) else None
        vector = qv.vector if qv is not None else None
        try:
            ranking, provenance = graph_channel(ctx.view, ctx.parsed.positive_text, vector, ctx.eligible, ctx.depth,
                                                ctx.config, query_model=qv.model if vector is not None else None)
        except ProjectionUnavailable as exc:
            return ChannelRun.skip(exc.describe())
        return ChannelRun(ranking, provenance)

    def fusion(self, config) -> None:
        return None


GRAPH = GraphChannel()
