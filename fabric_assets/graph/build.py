"""Annotations → cross-document entity graph rows, per parse (pure).

The graph's nodes are normalised entity names (``entity_key``, see
:func:`normalise_entity_name`), shared by every parse that mentions them; its
edges are ``(subject_key, predicate, object_key)`` triples. Every row belongs
to exactly one parse and carries the support spans of the annotation it came
from, so a release's graph is the union of the rows of its active parses: a
parse that leaves the release withdraws exactly its own mentions and edges,
and an entity or edge that no active parse supports is simply absent. Nothing
else is recomputed (seed 003, section 3.1 "Projection publication": graph
names, types and predicates are normalised; source annotations keep the
producer's output).
"""

from __future__ import annotations

import pyarrow as pa

from fabric_resources.identity import derived_id
from fabric_resources.schema import GRAPH_EDGES, GRAPH_MENTIONS
from fabric_resources.text_folding import normalise_entity_name

__all__ = ["edge_id", "graph_rows", "normalise_entity_name"]


def edge_id(subject_key: str, predicate: str, object_key: str) -> str:
    """Deterministic 128-bit hex ID of a graph edge, from its normalised triple only.

    The same triple extracted from two documents has one ``edge_id`` (one graph edge with
    support from both parses); each parse's row keeps its own support.

    >>> edge_id("ada lovelace", "worked with", "charles babbage") == edge_id(
    ...     "ada lovelace", "worked with", "charles babbage")
    True
    """
    return derived_id("edge", subject_key, predicate, object_key)


def graph_rows(annotations: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Mentions and edges of the parses in ``annotations`` (rows in the ``ANNOTATIONS`` schema).

    * each ``kind == "entity"`` row becomes one mention: ``entity_key`` =
      ``normalise_entity_name(text)``, ``name`` = the producer's ``text``, ``entity_type`` =
      the normalised type (``""`` when none), with the annotation's support spans;
    * each ``kind == "relation"`` row becomes one edge row: ``subject_key`` / ``object_key`` =
      the normalised subject and object, ``predicate`` normalised, ``edge_id`` from
      :func:`edge_id`, with the relation's support spans (the spans its quotes matched);
    * summaries make no graph rows; a name, subject, predicate or object that normalises to
      ``""`` (punctuation only) is skipped.

    Returns
    -------
    mentions : pa.Table
        ``GRAPH_MENTIONS``, sorted by (parse_id, entity_key, annotation_id).
    edges : pa.Table
        ``GRAPH_EDGES``, sorted by (parse_id, edge_id, annotation_id).
    """
    d = annotations.select(
        ["parse_id", "annotation_id", "kind", "text", "entity_type", "subject", "predicate", "object", "support"]
    ).to_pylist()
    mentions, edges = [], []
    for a in d:
        if a["kind"] == "entity":
            key = normalise_entity_name(a["text"])
            if key:
                mentions.append({
                    "parse_id": a["parse_id"], "entity_key": key, "name": a["text"],
                    "entity_type": normalise_entity_name(a["entity_type"] or ""),
                    "annotation_id": a["annotation_id"], "support": a["support"],
                })
        elif a["kind"] == "relation":
            s = normalise_entity_name(a["subject"] or "")
            p = normalise_entity_name(a["predicate"] or "")
            o = normalise_entity_name(a["object"] or "")
            if s and p and o:
                edges.append({
                    "parse_id": a["parse_id"], "edge_id": edge_id(s, p, o), "subject_key": s, "predicate": p,
                    "object_key": o, "annotation_id": a["annotation_id"], "support": a["support"],
                })
    mentions.sort(key=lambda r: (r["parse_id"], r["entity_key"], r["annotation_id"]))
    edges.sort(key=lambda r: (r["parse_id"], r["edge_id"], r["annotation_id"]))
    return (pa.Table.from_pylist(mentions, schema=GRAPH_MENTIONS),
            pa.Table.from_pylist(edges, schema=GRAPH_EDGES))
