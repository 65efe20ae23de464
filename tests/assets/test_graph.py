"""The entity graph, the annotation assets and the graph channel.

Pure properties of ``graph_rows`` and entity matching; then the channel over a real release
(real ingest, Lance tables, activation) with annotation rows written through the storage
contract; then the whole path with the real producer against a fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
from conftest import ingest

from fabric_assets.graph.build import edge_id, graph_rows, normalise_entity_name
from fabric_query.channels.graph import entity_matches, graph_channel, release_graph
from fabric_resources.config import EntityMatchConfig
from fabric_resources.identity import derived_id, text_hash
from fabric_resources.offsets import utf16_offset
from fabric_resources.schema import ANNOTATION_VECTORS, ANNOTATIONS, DENSE_DIM

P1, P2 = "a" * 32, "b" * 32


def _span(unit_id: str, unit_text: str, needle: str) -> dict:
    s = unit_text.index(needle)
    e = s + len(needle)
    return {"unit_id": unit_id, "start_char": s, "end_char": e, "start_utf16": utf16_offset(unit_text, s),
            "end_utf16": utf16_offset(unit_text, e), "text_hash": text_hash(needle)}


def _ann(parse_id: str, kind: str, text: str, support: list[dict], *, entity_type=None, subject=None,
         predicate=None, obj=None) -> dict:
    return {"parse_id": parse_id, "annotation_id": derived_id("test-ann", parse_id, kind, text),
            "excerpt_id": derived_id("excerpt", parse_id), "kind": kind, "text": text, "entity_type": entity_type,
            "subject": subject, "predicate": predicate, "object": obj, "quotes": [], "support": support,
            "window_ids": [], "producer": "test", "memo_key": ""}


# -- pure -------------------------------------------------------------------------------------

def test_graph_rows_merge_spellings_and_keep_support():
    """guards against: two spellings of one name becoming two nodes; edges losing their
    supporting spans or their predicate; edge IDs that differ across documents."""
    s1 = _span("u1", "Ada Lovelace met Babbage.", "Ada Lovelace")
    s2 = _span("u2", "Then ada  lovelace left.", "ada  lovelace")
    q = _span("u1", "Ada Lovelace met Babbage.", "Ada Lovelace met Babbage")
    table = pa.Table.from_pylist([
        _ann(P1, "entity", "Ada Lovelace", [s1], entity_type="Person"),
        _ann(P2, "entity", "ada  lovelace", [s2], entity_type="PERSON"),
        _ann(P1, "relation", "Ada Lovelace Met Babbage", [q], subject="Ada Lovelace", predicate="Met",
             obj="Charles  Babbage"),
        _ann(P2, "relation", "ada lovelace met charles babbage", [s2], subject="ada lovelace", predicate="met",
             obj="charles babbage"),
        _ann(P1, "summary", "A meeting.", [q]),
        _ann(P1, "entity", "—", [s1], entity_type="Person"),  # punctuation only: no node
    ], schema=ANNOTATIONS)
    mentions, edges = graph_rows(table)
    m = mentions.to_pylist()
    assert {r["entity_key"] for r in m} == {"ada lovelace"}
    assert {r["parse_id"] for r in m} == {P1, P2}
    assert {r["name"] for r in m} == {"Ada Lovelace", "ada  lovelace"}  # names as written
    assert {r["entity_type"] for r in m} == {"person"}
    assert [r["support"] for r in m if r["parse_id"] == P1] == [[s1]]
    e = edges.to_pylist()
    assert len(e) == 2 and {r["parse_id"] for r in e} == {P1, P2}
    assert {(r["subject_key"], r["predicate"], r["object_key"]) for r in e} == {
        ("ada lovelace", "met", "charles babbage")}
    assert {r["edge_id"] for r in e} == {edge_id("ada lovelace", "met", "charles babbage")}  # one edge, two parses
    assert [r["support"] for r in e if r["parse_id"] == P1] == [[q]]
    # Deterministic whatever the input order.
    again = graph_rows(table.take(list(reversed(range(table.num_rows)))))
    assert again[0].equals(mentions) and again[1].equals(edges)


def test_normalisation():
    """guards against: width, case, spacing and punctuation variants splitting one entity."""
    variants = ["Ada Lovelace", "ada  lovelace", "ADA\tLOVELACE", "Ａｄａ Ｌｏｖｅｌａｃｅ", "ada-lovelace", " Ada Lovelace. "]
    assert {normalise_entity_name(v) for v in variants} == {"ada lovelace"}
    assert normalise_entity_name("Café") != normalise_entity_name("Cafe")
    assert normalise_entity_name("...") == ""


def test_entity_match_classes_follow_config():
    """guards against: a partial token matching a name; fuzzy classes running when not
    configured; the acronym class matching a one-token name."""
    keys = {"ada lovelace", "analytical engine", "love", "babbage"}
    off = EntityMatchConfig()
    assert [m.key for m in entity_matches("What did Ada Lovelace write?", keys, off)] == ["ada lovelace"]
    assert entity_matches("lovelace", keys, off) == []  # one token of a two-token name
    assert entity_matches("lovelaces", keys, off) == []  # "love" is not a token of the query
    assert entity_matches("the AE and Babb", keys, off) == []
    on = EntityMatchConfig(acronyms=True, token_prefix=True, min_prefix_chars=4)
    got = {m.key: m.match for m in entity_matches("the AE and Babb", keys, on)}
    assert got == {"analytical engine": "acronym", "babbage": "token_prefix"}
    assert entity_matches("the B", {"babbage"}, on) == []  # no one-letter acronyms of one-token names
    assert entity_matches("Bab", {"babbage"}, on) == []  # shorter than min_prefix_chars
    assert [m.key for m in entity_matches("東京タワーの高さ", {"東京タワー", "大阪"}, off)] == ["東京タワー"]


def _token_prefix_reference(query_text: str, keys: set[str], min_prefix_chars: int) -> set[str]:
    """The token-prefix class as first written: every key tried at every query position."""
    qt = tuple(normalise_entity_name(query_text).split())
    out = set()
    for k in keys:
        kt = tuple(k.split(" "))
        for i in range(len(qt) - len(kt) + 1):
            window = qt[i:i + len(kt)]
            if window != kt and all((len(a) >= min_prefix_chars and b.startswith(a)) or a == b
                                    for a, b in zip(window, kt)):
                out.add(k)
                break
    return out


def test_token_prefix_matches_the_reference_and_a_long_query_stays_fast():
    """guards against: the token-prefix class trying every stored key at every query position
    (100,000 keys and a 1,000-character query of short tokens took 64 s in the graph channel);
    its indexed lookup matching other keys than the exhaustive rule."""
    import random
    import string
    import time

    from fabric_query.channels.graph import MAX_FUZZY_CANDIDATES, acronym_table, first_token_index

    rng = random.Random(18)
    stems = ["".join(rng.choices("abcde", k=rng.randint(1, 7))) for _ in range(400)]
    keys = {" ".join(rng.choices(stems, k=rng.randint(1, 3))) for _ in range(3000)}
    for mpc in (1, 2, 4):
        cfg = EntityMatchConfig(token_prefix=True, min_prefix_chars=mpc)
        for _ in range(60):
            q = " ".join(s[:rng.randint(1, len(s))] for s in rng.choices(stems, k=rng.randint(1, 8)))
            exact = {m.key for m in entity_matches(q, keys, EntityMatchConfig())}
            want = sorted(_token_prefix_reference(q, keys, mpc) - exact, key=lambda k: (-len(k), k))
            got = [m for m in entity_matches(q, keys, cfg, first_tokens=first_token_index(keys | {"zz top"}))
                   if m.match == "token_prefix"]
            assert [m.key for m in got] == want[:MAX_FUZZY_CANDIDATES], q

    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(20000)]
    big = {" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(100_000)}
    on = EntityMatchConfig(acronyms=True, token_prefix=True)
    tables = acronym_table(big), first_token_index(big)
    for q in ("a b c d e " * 100, " ".join(w[:4] for w in rng.choices(words, k=250))):
        started = time.perf_counter()
        entity_matches(q[:1000], big, on, *tables)
        assert time.perf_counter() - started < 5.0  # was 20-64 s; now well under a second


def test_fuzzy_classes_match_only_the_eligible_keys_given_the_whole_releases_tables():
    """guards against: the acronym class, handed the release's acronym table (the keys of every
    parse, as the channel passes it), matching keys of parses a filter excludes — they took the
    fuzzy cap's slots ahead of the in-scope key, so a filtered query's entity route depended on
    documents outside its scope."""
    from fabric_query.channels.graph import MAX_FUZZY_CANDIDATES, acronym_table, first_token_index

    eligible = {"analytical engine", "charles babbage"}
    outside = {f"a{'x' * 20}{i:02d} e{i:02d}" for i in range(MAX_FUZZY_CANDIDATES + 8)}  # "ae", longer
    outside |= {f"charles{'x' * 20} babbage{i:02d}" for i in range(MAX_FUZZY_CANDIDATES + 8)}
    every = eligible | outside
    on = EntityMatchConfig(acronyms=True, token_prefix=True)
    got = entity_matches("the AE of charles babbag", eligible, on, acronym_table(every), first_token_index(every))
    assert [(m.key, m.match) for m in got] == [("analytical engine", "acronym"), ("charles babbage", "token_prefix")]


def test_precomputed_tables_match_as_the_exhaustive_rule_without_enumerating_any_stored_key():
    """guards against: every stored key tested against every query (the channel's unspaced
    substring rule and its longest-key count walked all keys: 70 ms a query at 120,000 keys),
    and a filtered query building its key set from every mention of the release; and the
    indexed lookup matching other keys than the exhaustive rule (CJK keys inside a query,
    mixed-script keys, keys a filter leaves out)."""
    import random

    from fabric_query.channels.graph import acronym_table, first_token_index, unspaced_key_index
    from fabric_query.channels.function_words import english_function_words
    from fabric_resources.text_folding import UNSPACED

    function = english_function_words()

    class AskedOnly:
        """A key set that may be asked ``in``, never walked."""

        def __init__(self, keys):
            self.keys = keys

        def __contains__(self, key):
            return key in self.keys

        def __iter__(self):
            raise AssertionError("stored keys enumerated per query")

    rng = random.Random(55)
    han = [chr(0x6771 + i) for i in range(12)] + ["タ", "ワ", "ー"]
    latin = ["ada", "love", "lace", "tokyo", "to", "wer"]
    keys = {"".join(rng.choices(han, k=rng.randint(1, 4))) for _ in range(300)}
    keys |= {" ".join(rng.choices(latin, k=rng.randint(1, 3))) for _ in range(200)}
    keys |= {rng.choice(latin) + " " + "".join(rng.choices(han, k=2)) for _ in range(50)}  # mixed scripts
    on = EntityMatchConfig(acronyms=True, token_prefix=True)
    every = keys | {"".join(rng.choices(han, k=3)) + "外" for _ in range(40)}  # the release's keys, a superset
    tables = (acronym_table(every), first_token_index(every), unspaced_key_index(every),
              max(len(k.split(" ")) for k in every))
    for _ in range(200):
        q = "".join(rng.choice([rng.choice(han), " " + rng.choice(latin) + " "]) for _ in range(rng.randint(1, 12)))
        q += rng.choice(["外", "", "の高さ"])
        nq = normalise_entity_name(q)
        grams = {" ".join(nq.split(" ")[i:j]) for i in range(len(nq.split(" "))) for j in range(i + 1, 99)}
        exact = {k for k in keys if k in grams or (len(k) >= 2 and UNSPACED.search(k) and k in nq)}  # the rule, walked
        exact = {k for k in exact if k == nq or not all(t in function for t in k.split(" "))}
        for cfg in (EntityMatchConfig(), on):
            got = entity_matches(q, AskedOnly(keys), cfg, *tables)
            assert {m.key for m in got if m.match == "exact"} == exact, q
            assert got == entity_matches(q, keys, cfg), q
    assert any(m.key == "東東" for m in entity_matches("の東東京", keys | {"東東"}, EntityMatchConfig()))


def test_a_crowded_bucket_of_the_unspaced_index_is_walked_once_a_query():
    """guards against: the unspaced lookup walking a bucket at every query position that starts
    with its two characters (50,000 keys starting 東京 × a query of 1,000 東京 took 4.4 s, ten
    times the exhaustive walk it replaced); counted by walks, not timed."""
    from fabric_query.channels.graph import unspaced_key_index

    walks = []

    class Bucket(list):
        def __iter__(self):
            walks.append(len(self))
            return super().__iter__()

    keys = {"東京" + chr(0x4E00 + i) for i in range(2000)} | {"東京京", "京東"}
    table = {g: Bucket(ks) for g, ks in unspaced_key_index(keys).items()}
    q = "東京" * 1000 + "京"
    got = entity_matches(q, keys, EntityMatchConfig(), None, None, table, 1)
    assert {m.key for m in got} == {"東京京", "京東"}
    assert len(walks) <= 3  # 東京, 京東, 京京: each bucket at most once
    assert sum(walks) <= len(keys)


def test_names_of_function_words_only_match_no_question():
    """guards against: an entity the model listed as "the" or "what" (grounded in almost any
    English text; a document can steer the model into listing them) making its document an entity
    match for every English question, and a function word matching as an acronym ("is" for
    "internet service")."""
    keys = {"the", "what", "of it", "france", "internet service", "the who"}
    on = EntityMatchConfig(acronyms=True, token_prefix=True)
    assert [m.key for m in entity_matches("What is the capital of France?", keys, on)] == ["france"]
    assert [m.key for m in entity_matches("the IS team", keys, on)] == []
    assert [m.key for m in entity_matches("IS", keys, on)] == []  # not even alone
    assert [m.key for m in entity_matches("The Who", keys, EntityMatchConfig())] == ["the who"]  # named whole


def test_support_spans_reach_exactly_the_overlapping_chunks():
    """guards against: off-by-one overlap (end-exclusive ranges), spans reaching another parse's
    chunk with the same unit ID, empty spans lost."""
    from types import SimpleNamespace

    from fabric_query.channels.graph import ReleaseGraph

    frag = lambda u, s, e: {"unit_id": u, "start_char": s, "end_char": e, "start_utf16": s, "end_utf16": e}  # noqa: E731
    chunks = pa.Table.from_pylist([
        {"parse_id": P1, "chunk_id": "c1", "fragments": [frag("u", 0, 10)]},
        {"parse_id": P1, "chunk_id": "c2", "fragments": [frag("u", 10, 20), frag("v", 0, 5)]},
        {"parse_id": P2, "chunk_id": "d1", "fragments": [frag("u", 0, 20)]},
    ])
    view = SimpleNamespace(chunks=chunks.drop_columns(["fragments"]),  # as ReleaseView: fragments read apart
                           chunk_fragments=chunks.column("fragments").to_pylist())
    g = ReleaseGraph(view=view, mentions=[], edges=[], annotations={}, vector_ids=[],
                     vector_parse_ids=np.array([], dtype=object), vectors=np.zeros((0, DENSE_DIM), np.float32),
                     vector_models=[])
    span = lambda u, s, e: {"unit_id": u, "start_char": s, "end_char": e}  # noqa: E731
    assert g.chunks_for(P1, span("u", 5, 12)) == ["c1", "c2"]
    assert g.chunks_for(P1, span("u", 0, 10)) == ["c1"]
    assert g.chunks_for(P1, span("u", 10, 11)) == ["c2"]
    assert g.chunks_for(P1, span("u", 10, 10)) == ["c2"]  # an empty span: the chunk holding its point
    assert g.chunks_for(P1, span("u", 20, 25)) == []
    assert g.chunks_for(P1, span("v", 4, 9)) == ["c2"]
    assert g.chunks_for(P2, span("u", 5, 6)) == ["d1"]
    assert g.chunks_for(P1, span("w", 0, 3)) == []


# -- the channel over a real release (annotation rows written through the storage contract) ----

# Each paragraph ~90 word pieces, so each is one fine chunk (cap 128).
FILLER = ("Quiet ledgers recorded {w} shipments across the northern quay while clerks argued about "
          "rope prices, tar barrels, ballast stones and the slow arithmetic of {w} cargo manifests "
          "that nobody ever wanted to reconcile before the winter storms arrived at the harbour. "
          "Gulls circled the {w} warehouses, porters hauled crates of salted fish up the stairs, "
          "and the tide crept over the slipway.")
DOC_A = "\n\n".join([
    "Ada Lovelace wrote the first published program for the engine. " + FILLER.format(w="amber"),
    "Charles Babbage designed the calculating engine in his workshop. " + FILLER.format(w="cobalt"),
    "She corresponded with Charles Babbage about Bernoulli numbers. " + FILLER.format(w="violet"),
    "Sourdough bread needs flour, water and a patient baker. " + FILLER.format(w="saffron"),
]) + "\n"
DOC_B = "At a dinner party in London, ada  lovelace met Mary Somerville, who admired her mathematics.\n"


def _units(home, parse_id):
    u = home.tables.read("units", parse_ids=[parse_id], columns=["unit_id", "text"]).to_pydict()
    return list(zip(u["unit_id"], u["text"]))


def _find(units, needle):
    for uid, text in units:
        if needle in text:
            return _span(uid, text, needle)
    raise AssertionError(needle)


def _write_annotations(home, rows: list[dict], embedder) -> None:
    """What the annotation assets write, for the parses in ``rows``."""
    table = pa.Table.from_pylist(rows, schema=ANNOTATIONS)
    pids = sorted({r["parse_id"] for r in rows})
    home.tables.replace_partitions("annotations", pids, table)
    mentions, edges = graph_rows(table)
    home.tables.replace_partitions("graph_mentions", pids, mentions)
    home.tables.replace_partitions("graph_edges", pids, edges)
    vec_rows = [r for r in rows if r["kind"] in ("summary", "relation")]
    vectors = embedder.encode_passages([r["text"] for r in vec_rows])
    home.tables.replace_partitions("annotation_vectors", pids, pa.table({
        "parse_id": [r["parse_id"] for r in vec_rows], "annotation_id": [r["annotation_id"] for r in vec_rows],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DENSE_DIM),
        "model": [embedder.identity] * len(vec_rows)}, schema=ANNOTATION_VECTORS))


def _citations_verified(fabric, view, chunk_ids):
    """Resolve the citation the pipeline gives each chunk (``assembly.citation_for``)."""
    from fabric_query.assembly import citation_for

    out = []
    for cid in chunk_ids:
        c = view.chunk(cid)
        sources = view.sources_by_parse[c["parse_id"]]
        cit = citation_for(view, c["parse_id"], cid, [c["text"]], [c["fragments"]], sources)
        out.append((cit.source_key, fabric.resolve(cit).status))
    return out


def test_graph_channel_over_a_release_and_withdrawal(tmp_path, fabric_home):
    """guards against: the graph not joining an entity across documents; hop or annotation
    routes reaching chunks outside the supporting spans; filters applied after ranking; a
    release not published when only annotation tables changed; a deleted document's entities
    and edges still answering."""
    from fabric_assets.activation.activate import activate
    from fabric_query import Fabric
    from fabric_query.release import release_view
    from fabric_resources.models.embedder import shared_embedder

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text(DOC_A)
    (src / "b.txt").write_text(DOC_B)
    ingest(src, fabric_home)
    home = fabric_home
    release = home.catalog.current_release()
    pa_, pb = (release.manifest["sources"][k]["parse_id"] for k in ("fs:src/a.txt", "fs:src/b.txt"))
    ua, ub = _units(home, pa_), _units(home, pb)
    p3 = "She corresponded with Charles Babbage about Bernoulli numbers."
    rows = [
        _ann(pa_, "entity", "Ada Lovelace", [_find(ua, "Ada Lovelace")], entity_type="person"),
        _ann(pa_, "entity", "Charles Babbage", [_find(ua, "Charles Babbage designed"),
                                                _find(ua, "with Charles Babbage")], entity_type="person"),
        _ann(pa_, "relation", "Ada Lovelace corresponded with Charles Babbage", [_find(ua, p3)],
             subject="Ada Lovelace", predicate="corresponded with", obj="Charles Babbage"),
        _ann(pa_, "summary", "Lovelace and Babbage exchanged letters about Bernoulli numbers.", [_find(ua, p3)]),
        _ann(pb, "entity", "ada  lovelace", [_find(ub, "ada  lovelace")], entity_type="person"),
        _ann(pb, "entity", "Mary Somerville", [_find(ub, "Mary Somerville")], entity_type="person"),
        _ann(pb, "relation", "ada lovelace met Mary Somerville", [_find(ub, "ada  lovelace met Mary Somerville")],
             subject="ada lovelace", predicate="met", obj="Mary Somerville"),
    ]
    embedder = shared_embedder()
    _write_annotations(home, rows, embedder)

    # Only annotation tables changed: activation still publishes, with the same active set.
    report = activate(home)
    assert report.published and report.activated == [] and report.deactivated == []
    assert activate(home).published is False  # and nothing changed since
    view = release_view(home, home.catalog.current_release())
    chunk_of = {}
    for cid, pid, text in zip(view.chunks.column("chunk_id").to_pylist(), view.chunks.column("parse_id").to_pylist(),
                              view.chunk_texts):
        for marker in ("Ada Lovelace wrote", "Charles Babbage designed", p3, "Sourdough", "ada  lovelace met"):
            if marker in text:
                chunk_of[marker] = cid
    assert len(set(chunk_of.values())) == 5, "each paragraph of DOC_A should be its own chunk"

    g = release_graph(view)
    assert {m["parse_id"] for m in g.mentions if m["entity_key"] == "ada lovelace"} == {pa_, pb}

    cfg = home.config
    qvec = embedder.encode_queries(["Ada Lovelace"])[0]
    ranking, prov = graph_channel(view, "Ada Lovelace", qvec, None, 50, cfg)
    ids = [c for c, _ in ranking]
    entity_chunks = {c for c in ids if "entity" in prov[c]["routes"]}
    assert entity_chunks == {chunk_of["Ada Lovelace wrote"], chunk_of["ada  lovelace met"]}  # across documents
    hop = {c for c in ids if "hop" in prov[c]["routes"]}
    # One hop: the relation's evidence and the neighbour's mentions in the edge's own parse.
    assert hop == {chunk_of[p3], chunk_of["Charles Babbage designed"], chunk_of["ada  lovelace met"]}
    assert "corresponded with" in prov[chunk_of[p3]]["predicates"]
    assert chunk_of["Sourdough"] not in ids  # nothing supported by an annotation is there
    for cid in ids:
        sup = prov[cid]["support"]
        assert sup and all(s["parse_id"] == view.chunk(cid)["parse_id"] for s in sup)
    names = {e["name"] for e in prov[chunk_of["ada  lovelace met"]]["entities"]}
    assert names == {"ada  lovelace"}
    fabric = Fabric(home.root)
    assert {s for _, s in _citations_verified(fabric, view, ids)} == {"verified"}

    # Annotation embeddings: a paraphrase of the summary reaches the paragraph it summarises.
    q = "letters discussing Bernoulli numbers"
    ranking, prov = graph_channel(view, q, embedder.encode_queries([q])[0], None, 50, cfg)
    assert ranking and ranking[0][0] == chunk_of[p3] and prov[chunk_of[p3]]["routes"] == ["annotation"]
    assert {a["kind"] for a in prov[chunk_of[p3]]["annotations"]} == {"summary", "relation"}

    # Filters apply before ranking: only document B is eligible.
    ranking, prov = graph_channel(view, "Ada Lovelace Charles Babbage", qvec, {pb}, 50, cfg)
    assert {view.chunk(c)["parse_id"] for c, _ in ranking} == {pb}

    # Delete B: its mentions and edges leave the next release; A's stay; nothing is recomputed.
    mentions_version = home.tables.version("graph_mentions")
    (src / "b.txt").unlink()
    ingest(src, home)
    assert home.tables.version("graph_mentions") == mentions_version
    view2 = release_view(home, home.catalog.current_release())
    g2 = release_graph(view2)
    assert {m["parse_id"] for m in g2.mentions} == {pa_} and {e["parse_id"] for e in g2.edges} == {pa_}
    assert graph_channel(view2, "Mary Somerville", None, None, 50, cfg)[0] == []
    ranking, _ = graph_channel(view2, "Ada Lovelace", qvec, None, 50, cfg)
    assert ranking and {view2.chunk(c)["parse_id"] for c, _ in ranking} == {pa_}
    # The old release still answers as it did (releases are immutable).
    assert graph_channel(view, "Mary Somerville", None, None, 50, cfg)[0]


# -- the whole path: real producer, fake OpenAI-compatible server, Dagster runs -----------------

ONE = "Lovelace wrote long notes on the engine.\n\nThe notes described loops and Bernoulli numbers.\n"
TWO = "Babbage admired Lovelace and her notes.\n"
THREE = "Somerville translated Laplace for English readers.\n"


def _configure(home_root, base_url: str, **annotation) -> None:
    cfg = {"annotation": {"enabled": True, "call_retries": 1,
                          "endpoint": {"base_url": base_url, "model": "fake-model", "timeout_s": 10,
                                       "initial_backoff_s": 0.01, "max_backoff_s": 0.05}, **annotation}}
    (home_root / "config.json").write_text(json.dumps(cfg))


def _materialized(home, asset: str, partition: str) -> list[dict]:
    """Metadata of every materialization of ``asset`` for ``partition``, oldest first."""
    import dagster as dg

    from fabric_assets.ingest import dagster_instance

    records = dagster_instance(home).fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=100).records
    return [{k: v.value for k, v in r.asset_materialization.metadata.items()} for r in reversed(records)]


def _view(home):
    from fabric_query.release import release_view

    return release_view(home, home.catalog.current_release())


def _parse_of(home, key: str) -> str:
    return home.catalog.source(key).parse_id


def test_annotation_end_to_end(tmp_path, fabric_home):
    """guards against: the graph not joining an entity across documents; annotation cost not
    recorded in Dagster; graph hits whose citations do not verify; a deleted document's entities
    still answering or its deletion re-annotating the other one; re-parsed unchanged text calling
    the model again; the sensors not chaining activation → annotation → activation."""
    import dagster as dg
    from fake_openai_server import FakeChatServer

    from fabric_assets.ingest import _run_config, dagster_instance, job, run_pending
    from fabric_assets.sensors import activate_after_annotation_run, annotate_after_activation, range_tags
    from fabric_assets.sources.scan import scan
    from fabric_query import Fabric
    from fabric_resources.dagster_resources import FabricHomeResource
    from fabric_resources.home import FabricHome
    from fabric_resources.models.embedder import shared_embedder

    src = tmp_path / "src"
    src.mkdir()
    (src / "one.txt").write_text(ONE)
    (src / "two.txt").write_text(TWO)
    with FakeChatServer() as srv:
        _configure(fabric_home.root, srv.base_url)
        home = FabricHome(fabric_home.root)
        first = ingest(src, home)
        assert first.annotation_run_ids and first.annotation_failed_runs == []
        p1, p2 = _parse_of(home, "fs:src/one.txt"), _parse_of(home, "fs:src/two.txt")

        # Asset metadata records the cost, per partition, and it adds up to what the server saw.
        metas = {p: _materialized(home, "annotations", p)[-1] for p in (p1, p2)}
        assert all(m["outcome"] == "complete" and m["calls"] > 0 and m["prompt_tokens"] > 0
                   and m["completion_tokens"] > 0 for m in metas.values())
        assert sum(m["calls"] for m in metas.values()) == len(srv.calls())
        assert {"memo_hits", "dropped_ungrounded", "retries", "wall_seconds"} <= set(metas[p1])
        assert _materialized(home, "graph_mentions", p1)[-1]["mentions"] > 0

        # The graph joins "Lovelace" across the two documents, in the published release.
        view = _view(home)
        g = release_graph(view)
        assert {m["parse_id"] for m in g.mentions if m["entity_key"] == "lovelace"} == {p1, p2}
        assert g.edges and all(e["support"] for e in g.edges)
        qvec = shared_embedder().encode_queries(["Lovelace"])[0]
        ranking, prov = graph_channel(view, "Lovelace", qvec, None, 50, home.config)
        entity_hits = [c for c, _ in ranking if "entity" in prov[c]["routes"]]
        assert {view.chunk(c)["parse_id"] for c in entity_hits} == {p1, p2}
        fabric = Fabric(home.root)
        assert {s for _, s in _citations_verified(fabric, view, [c for c, _ in ranking])} == {"verified"}
        pack = fabric.search("Lovelace")
        if "graph" in pack.channels_run:  # once the pipeline runs the channel (the lead integrates it)
            graph_hits = [h for h in pack.results if "graph" in h.channels]
            assert graph_hits and all(fabric.resolve(h.citation).status == "verified" for h in graph_hits)

        # Delete two.txt: exactly its support is withdrawn; nothing is annotated again.
        calls = len(srv.calls())
        (src / "two.txt").unlink()
        gone = ingest(src, home)
        assert gone.annotation_run_ids == [] and len(srv.calls()) == calls
        g = release_graph(_view(home))
        assert {m["parse_id"] for m in g.mentions} == {p1} and {e["parse_id"] for e in g.edges} <= {p1}
        assert graph_channel(_view(home), "Babbage", None, None, 50, home.config)[0] == []
        ranking, _ = graph_channel(_view(home), "Lovelace", qvec, None, 50, home.config)
        assert ranking and {_view(home).chunk(c)["parse_id"] for c, _ in ranking} == {p1}

        # Re-parse of unchanged text (same text behind a UTF-8 BOM: new bytes, new parse): memo only.
        (src / "one.txt").write_bytes(b"\xef\xbb\xbf" + ONE.encode())
        again = ingest(src, home)
        p1b = _parse_of(home, "fs:src/one.txt")
        assert p1b != p1 and again.annotation_run_ids and len(srv.calls()) == calls
        meta = _materialized(home, "annotations", p1b)[-1]
        assert meta["calls"] == 0 and meta["memo_hits"] > 0 and meta["outcome"] == "complete"
        g = release_graph(_view(home))
        assert {m["parse_id"] for m in g.mentions} == {p1b} and any(m["entity_key"] == "lovelace" for m in g.mentions)

        # The sensors: a new parse activated outside `fabric ingest` is annotated, then published.
        (src / "three.txt").write_text(THREE)
        instance = dagster_instance(home)
        run_pending(home, instance, scan(home).parse_ids_to_run)
        p3 = _parse_of(home, "fs:src/three.txt")
        activation = job(home, "activation_job").execute_in_process(instance=instance, run_config=_run_config(home))
        ctx = dg.build_run_status_sensor_context(
            sensor_name="annotate_after_activation", dagster_event=activation.get_run_success_event(),
            dagster_instance=instance, dagster_run=activation.dagster_run,
            resources={"fabric": FabricHomeResource(home=str(home.root))})
        (request,) = annotate_after_activation(ctx)
        assert request.tags == range_tags([p3])
        annotated = job(home, "annotation_job").execute_in_process(
            instance=instance, tags=request.tags, run_config=_run_config(home))
        assert annotated.success
        ctx = dg.build_run_status_sensor_context(
            sensor_name="activate_after_annotation_run", dagster_event=annotated.get_run_success_event(),
            dagster_instance=instance, dagster_run=annotated.dagster_run,
            resources={"fabric": FabricHomeResource(home=str(home.root))})
        assert activate_after_annotation_run(ctx).run_key == f"activate-after:{annotated.run_id}"
        job(home, "activation_job").execute_in_process(instance=instance, run_config=_run_config(home))
        assert graph_channel(_view(home), "Somerville", None, None, 50, home.config)[0]
        ctx = dg.build_run_status_sensor_context(
            sensor_name="annotate_after_activation", dagster_event=activation.get_run_success_event(),
            dagster_instance=instance, dagster_run=activation.dagster_run,
            resources={"fabric": FabricHomeResource(home=str(home.root))})
        assert isinstance(annotate_after_activation(ctx), dg.SkipReason)  # nothing left: no loop


def test_failing_endpoint_never_blocks_search_and_required_waits(tmp_path, fabric_home):
    """guards against: an annotation endpoint that always fails blocking activation or search;
    a failed annotation being re-requested on every activation; ``required_for_activation``
    activating a parse without annotations, or holding it forever once the endpoint recovers."""
    from fake_openai_server import STAGES, FakeChatServer

    from fabric_assets.projections import ANNOTATION_VERDICT
    from fabric_query import Fabric
    from fabric_resources.home import FabricHome

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text("The Lighthouse keeper wrote tide tables in a green ledger.\n")
    with FakeChatServer(always={s: "server_error" for s in STAGES}) as srv:
        _configure(fabric_home.root, srv.base_url)
        home = FabricHome(fabric_home.root)
        summary = ingest(src, home)
        assert srv.calls() and all(c.status == 500 for c in srv.calls())
        fabric = Fabric(home.root)
        assert fabric.search("lighthouse keeper").results[0].citation.source_key == "fs:src/light.txt"
        pid = _parse_of(home, "fs:src/light.txt")
        run = home.catalog.parse_run(pid)
        assert run.status == "ready" and run.verdicts[ANNOTATION_VERDICT]["passed"] is False
        assert "500" in run.verdicts[ANNOTATION_VERDICT]["detail"]
        meta = _materialized(home, "annotations", pid)[-1]
        assert meta["outcome"] == "incomplete" and meta["chain_failures"] > 0 and meta["calls"] > 0
        assert summary.annotation_failed_runs == []  # the run itself succeeds

        # Required for activation: a new parse waits while the endpoint fails...
        _configure(fabric_home.root, srv.base_url, required_for_activation=True)
        home = FabricHome(fabric_home.root)
        (src / "harbour.txt").write_text("The Harbour master counted herring boats at dawn.\n")
        ingest(src, home)
        hid = _parse_of(home, "fs:src/harbour.txt")
        assert home.catalog.parse_run(hid).status == "parsed"
        assert "fs:src/harbour.txt" not in home.catalog.current_release().manifest["sources"]
        assert all(r.citation.source_key != "fs:src/harbour.txt" for r in fabric.search("herring boats").results)
        assert fabric.search("lighthouse keeper").results  # the active one still answers

        # ... and activates once it recovers (the next ingest retries failed annotations).
        srv.always = {}
        ingest(src, home)
        assert home.catalog.parse_run(hid).status == "ready"
        assert fabric.search("herring boats").results[0].citation.source_key == "fs:src/harbour.txt"
        assert graph_channel(_view(home), "Harbour", None, None, 50, home.config)[0]


def test_disabled_annotation_imports_no_openai_and_writes_nothing(tmp_path):
    """guards against: a home without annotation loading the OpenAI SDK or writing annotation
    tables, even when the annotation job is run by hand; that run recording the switched-off
    stage as materializations (issue 18: it shows as skipped, and Dagster skips the steps made
    from it); the parse run, which does not plan the stage, not saying it skipped it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The Lighthouse keeper wrote tide tables.\n")
    home_dir = tmp_path / "home"
    code = f"""
import os, sys
os.environ["DAGSTER_HOME"] = {str(home_dir / "dagster")!r}
from fabric_resources.home import FabricHome
from fabric_assets.ingest import ingest, _run_config, dagster_instance, job
from fabric_assets.sensors import range_tags
from fabric_resources.dagster_resources import FAKE_MODELS  # the dense model is not what this is about
home = FabricHome({str(home_dir)!r})
summary = ingest({str(src)!r}, home, models=FAKE_MODELS)
assert summary.annotation_run_ids == []
pid = home.catalog.sources()[0].parse_id
result = job(home, "annotation_job", FAKE_MODELS).execute_in_process(
    instance=dagster_instance(home), tags=range_tags([pid]), run_config=_run_config(home))
assert result.success
tables = ("annotations", "graph_mentions", "graph_edges", "annotation_vectors")
assert all(home.tables.version(t) is None for t in tables)
import dagster as dg
instance = dagster_instance(home)
steps = {{s.step_key: s.status.value for s in instance.get_run_step_stats(result.run_id)}}
assert steps == {{"annotations": "SUCCESS", "graph": "SKIPPED", "annotation_vectors": "SKIPPED"}}, steps
assert all(not instance.fetch_materializations(dg.AssetKey(t), limit=10).records for t in tables)
# Newest first: the annotation run's own step, then the parse run's context_windows step (no job
# but annotation_job plans the stage while it is off: the step it is made from says it skipped).
by_hand, by_parse_run = instance.fetch_failed_materializations(dg.AssetKey("annotations"), limit=10).records
(parse_run,) = summary.run_ids
for skipped, run_id, step in ((by_hand, result.run_id, "annotations"), (by_parse_run, parse_run, "context_windows")):
    failure = skipped.event_log_entry.dagster_event.event_specific_data.asset_materialization_failure
    assert (skipped.partition_key, skipped.run_id, failure.failure_type.value) == (pid, run_id, "SKIPPED")
    assert skipped.event_log_entry.dagster_event.step_key == step
    assert "annotation.enabled is false" in failure.description
for t in tables[1:]:  # Dagster skipped the annotation run's steps made from it; the parse run said so
    (skipped,) = instance.fetch_failed_materializations(dg.AssetKey(t), limit=10).records
    assert (skipped.run_id, skipped.event_log_entry.dagster_event.step_key) == (parse_run, "context_windows")
from fabric_query import Fabric
assert Fabric({str(home_dir)!r}).search("lighthouse").results
bad = sorted(m for m in sys.modules if m == "openai" or m.startswith("openai."))
print(bad)
sys.exit(1 if bad else 0)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_source_withheld_or_deleted_while_it_waits_for_annotation_is_never_sent(tmp_path, fabric_home):
    """guards against: a parse waiting for annotation (``required_for_activation``) whose source
    was then withheld (``sources.withheld``) or deleted being sent to the endpoint by the next
    ingest — the withheld (or deleted) text reached the model and its annotations were written."""
    from fake_openai_server import STAGES, FakeChatServer

    from fabric_assets.annotations.planning import parses_needing_annotation
    from fabric_resources.home import FabricHome

    src = tmp_path / "src"
    (src / "pub").mkdir(parents=True)
    (src / "private").mkdir()
    (src / "pub" / "one.txt").write_text("Ada Lovelace worked on the engine with Charles Babbage.\n")
    (src / "private" / "two.txt").write_text("Zorblax Quimby guarded the vault of Hunterstone.\n")
    (src / "pub" / "gone.txt").write_text("Wilbur Fenwick sold the lighthouse at Tarrowby.\n")
    with FakeChatServer(always={s: "server_error" for s in STAGES}) as srv:
        _configure(fabric_home.root, srv.base_url, required_for_activation=True)
        home = FabricHome(fabric_home.root)
        ingest(src, home)
        secret = _parse_of(home, "fs:src/private/two.txt")
        assert home.catalog.parse_run(secret).status == "parsed"  # waits for its annotation
        gone = _parse_of(home, "fs:src/pub/gone.txt")
        assert home.catalog.parse_run(gone).status == "parsed"
        assert any("Quimby" in json.dumps(c.payload) for c in srv.calls())  # sent while they were visible
        assert any("Fenwick" in json.dumps(c.payload) for c in srv.calls())

        cfg = json.loads((fabric_home.root / "config.json").read_text())
        (fabric_home.root / "config.json").write_text(json.dumps({**cfg, "sources": {"withheld": ["src/private/*"]}}))
        (src / "pub" / "gone.txt").unlink()
        srv.always = {}  # the endpoint recovers
        sent = len(srv.calls())
        home = FabricHome(fabric_home.root)
        ingest(src, home)
        later = srv.calls()[sent:]
        assert later and not any(n in json.dumps(c.payload) for c in later for n in ("Quimby", "Fenwick"))
        assert list(home.catalog.current_release().manifest["sources"]) == ["fs:src/pub/one.txt"]
        assert graph_channel(_view(home), "Lovelace", None, None, 50, home.config)[0]
        assert {secret, gone}.isdisjoint(parses_needing_annotation(home, retry_failed=True))


def test_a_withheld_source_is_not_sent_when_a_chunker_change_rechunks_it(tmp_path, fabric_home):
    """guards against: a chunker change under ``required_for_activation`` re-chunking the parse of
    a source withheld since it was published and annotating it at once (``run_rechunk`` sent every
    re-chunked parse): the withheld text reached the endpoint."""
    from fake_openai_server import FakeChatServer

    from fabric_resources.home import FabricHome

    src = tmp_path / "src"
    (src / "pub").mkdir(parents=True)
    (src / "private").mkdir()
    (src / "pub" / "one.txt").write_text("Ada Lovelace worked on the engine with Charles Babbage.\n")
    # Long enough that a smaller chunk size cuts it otherwise: new excerpts, which the memo lacks.
    (src / "private" / "two.txt").write_text(
        " ".join(f"Zorblax Quimby guarded vault number {i} of Hunterstone." for i in range(40)) + "\n")
    with FakeChatServer() as srv:
        _configure(fabric_home.root, srv.base_url, required_for_activation=True)
        ingest(src, FabricHome(fabric_home.root))
        assert any("Quimby" in json.dumps(c.payload) for c in srv.calls())  # annotated while visible

        cfg = json.loads((fabric_home.root / "config.json").read_text())
        (fabric_home.root / "config.json").write_text(json.dumps(
            {**cfg, "sources": {"withheld": ["src/private/*"]}, "chunking": {"max_tokens": 64}}))
        sent = len(srv.calls())
        home = FabricHome(fabric_home.root)
        summary = ingest(src, home)
        assert summary.rechunked  # the chunker change re-chunked the parses
        assert not any("Quimby" in json.dumps(c.payload) for c in srv.calls()[sent:])
        assert list(home.catalog.current_release().manifest["sources"]) == ["fs:src/pub/one.txt"]
