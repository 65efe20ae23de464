"""The read side's channel protocol (issue 14, item 2): one registry of channels, ``search(...,
channels=...)``, hard constraints by the carrier flag, fusion chosen by the ``FusionMethod`` in config,
and the lexical-only path as a channel selection rather than a copy."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import ingest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_query import Fabric
from fabric_query.channels.base import Channel
from fabric_query.channels.dense import DenseChannel
from fabric_query.channels.registry import CHANNEL_NAMES, CHANNELS
from fabric_query.errors import InvalidArgumentError
from fabric_query.fusion import FusionMethod, convex, rrf
from fabric_resources.config import ConfigError, FabricConfig
from fabric_resources.home import FabricHome

FILES = {
    "light.txt": "The lighthouse keeper logged the tide every evening.\n\n"
                 "A storm broke the lamp of the lighthouse in March; the keeper mended it.\n\n"
                 "Lighthouse lenses focus the lamp into a beam that ships can see.\n",
    "harbour.txt": "The harbour master counted the herring boats at dawn.\n\n"
                   "Fishing boats left the harbour before the storm reached the coast.\n",
    "bread.txt": "Sourdough bread needs a lively starter and patience.\n\nThe oven must be very hot.\n",
    "keeper.md": "# Keepers\n\nA keeper of the light lived alone on the island with a lamp.\n\n"
                 "## Tides\n\nThe tide tables were kept in a green ledger.\n",
    "ja.txt": "認証トークンは利用者を示す文字列です。\n\n有効期限が切れたら認証トークンを再発行します。\n\n"
              "灯台守は毎晩灯台の灯りをともした。\n",
}
ENGLISH = ["lighthouse keeper", "storm boats", '"lighthouse keeper" tide', "lamp -storm", "bread oven", "zzzzqqq"]
JAPANESE = ["認証トークン", "灯台 灯り", '"認証トークン" 期限']


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("channels")
    folder = tmp / "corpus"
    folder.mkdir()
    for rel, text in FILES.items():
        (folder / rel).write_text(text, encoding="utf-8")
    ingest(folder, FabricHome(tmp / "home"))
    return tmp


@pytest.fixture(scope="module")
def fabric(pristine):
    return Fabric(pristine / "home")


def _seen(pack) -> dict:
    return pack.model_dump(exclude={"timings"})


def test_registry_holds_each_channel_once_in_order_behind_the_protocol():
    """guards against: a channel the pipeline runs that is not in the registry, or one that does not
    declare what the pipeline reads (name, stage, carrier flag, fallback, applies, run, fusion)."""
    assert CHANNEL_NAMES == ("word", "substring", "scan", "dense", "dense_multilingual", "graph")
    assert all(isinstance(c, Channel) for c in CHANNELS)
    assert {c.name for c in CHANNELS if c.hard_constraint_carrier} == {"word", "substring", "scan"}
    assert {c.name: c.fallback for c in CHANNELS if c.fallback} == {"word": "scan", "substring": "scan"}


def test_default_search_equals_naming_every_channel(fabric):
    """guards against: ``channels=None`` and the full set meaning different searches."""
    for q in ENGLISH + JAPANESE:
        assert _seen(fabric.search(q, debug=True)) == _seen(fabric.search(q, debug=True, channels=set(CHANNEL_NAMES)))


def test_the_lexical_only_benchmark_path_is_the_pipeline_without_encoding(pristine):
    """guards against: the lexical-only benchmark path (``query_latency.lexical_only_search``) becoming a
    copy of part of the pipeline again, or a lexical channel selection that still encodes the query."""
    from fabric_assets.measurement.query_latency import LEXICAL_CHANNELS, lexical_only_search

    class NeverEncode:
        identity = "never"

        def encode_query(self, *args, **kwargs):
            raise AssertionError("the lexical-only path encoded a query")

        encode_queries = encode_passages = encode_query

    fab = Fabric(pristine / "home")
    fab.__dict__["_encoder"] = NeverEncode()  # the cached slot behind Fabric.encoder: every search uses it
    for q in ENGLISH:
        pack = fab.search(q, channels=LEXICAL_CHANNELS)
        answer = lexical_only_search(fab, q)
        assert answer.chunk_ids == tuple(h.chunk_id for h in pack.results), q
        assert set(pack.channels_run) <= {"word", "substring"} and not pack.skipped_channels
        stages = [t.stage for t in answer.timings]
        assert stages == ["pin_and_parse", "eligibility", "lexical", "fusion", "passages", "evidence", "total"], q
    assert any(lexical_only_search(fab, q).chunk_ids for q in ENGLISH)


def test_lexical_channels_alone_rank_as_rrf_over_the_full_searchs_lexical_rankings(fabric):
    """guards against: a channel selection that runs the lexical channels otherwise than the full search
    does (feedback, CJK bigram re-scoring), or fuses them by the e5 route's convex combination."""
    cfg = fabric.home.config.query
    for q in ENGLISH + JAPANESE:
        full = fabric.search(q, debug=True, limit=20)
        lexical = {k: v for k, v in full.channel_rankings.items() if k in ("word", "substring")}
        expected = tuple(cid for cid, _ in rrf(lexical, cfg.rrf_k, cfg.channel_weights))[:20]
        alone = fabric.search(q, debug=True, limit=20, channels={"word", "substring"})
        assert alone.channel_rankings == lexical, q
        assert tuple(h.chunk_id for h in alone.results) == expected, q
    ja = fabric.search(JAPANESE[0], debug=True)
    assert "substring" in ja.channels_run and "dense_multilingual" in ja.channels_run


def test_unknown_or_malformed_channel_selections_raise_the_typed_error(fabric):
    """guards against: a typo that silently runs nothing (or everything), or a str split into letters."""
    for bad in ({"word", "bogus"}, "word", set(), [1], 5, {"Word"}, b"dense"):
        with pytest.raises(InvalidArgumentError) as err:
            fabric.search("lighthouse", channels=bad)
        assert "channel" in str(err.value)
    with pytest.raises(InvalidArgumentError, match="word, substring, scan, dense, dense_multilingual, graph"):
        fabric.search("lighthouse", channels={"bogus"})
    assert fabric.search("lighthouse", channels=["dense"]).channels_run == ("dense",)


@pytest.mark.parametrize("query, named, says", [
    ("lighthouse", "substring", "no text in a script written without spaces"),
    ("認証トークン", "dense", "routed to dense_multilingual"),
    ("lighthouse keeper", "dense_multilingual", "routed to dense"),
    ("lighthouse", "graph", "annotation is off"),
])
def test_naming_only_channels_that_do_not_apply_says_why(fabric, query, named, says):
    """guards against (hostile trial 10a): a search naming only channels that do not apply to its
    query answering no results with nothing run and nothing skipped (``channels_run: []``,
    ``skipped_channels: {}``), read as "nothing matches"; through HTTP and MCP alike."""
    pack = fabric.search(query, channels=[named])
    assert pack.results == () and pack.channels_run == ()
    assert set(pack.skipped_channels) == {named} and says in pack.skipped_channels[named], pack.skipped_channels
    # One named channel that applies answers; the others are not remarked on (the lexical pair is
    # named together for any query, and substring applies to none in English).
    both = fabric.search(query, channels=[named, "word"])
    assert both.results and both.skipped_channels == {}


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.none(), st.text(max_size=12), st.integers(), st.lists(st.one_of(st.sampled_from(CHANNEL_NAMES),
                                                                                       st.text(max_size=6), st.integers()),
                                                                             max_size=4)))
def test_any_channels_value_answers_or_raises_invalid_argument(fabric, channels):
    """guards against: a channels value that escapes the typed errors (the fuzz promise of search)."""
    try:
        pack = fabric.search("lighthouse keeper", channels=channels)
    except InvalidArgumentError:
        return
    if channels is not None:
        assert set(pack.channels_run) <= set(channels) | {"scan"}


def test_naming_word_brings_the_scan_when_the_index_cannot_serve(pristine, tmp_path):
    """guards against: a lexical-only search over a missing index answering nothing, silently; and a
    named scan not running on a healthy index."""
    copy = tmp_path / "home"
    shutil.copytree(pristine / "home", copy)
    healthy = Fabric(copy)
    scan = healthy.search("lighthouse keeper", channels={"scan"}, debug=True)
    assert scan.channels_run == ("scan",) and scan.fallback_reason is None and scan.results
    assert healthy.search("lighthouse keeper", channels={"word"}).channels_run == ("word",)

    shutil.rmtree(healthy.home.lexical.root)
    import fabric_query.release as release

    release._VIEWS.clear()  # the view holds its opened index
    pack = Fabric(copy).search("lighthouse keeper", channels={"word", "substring"})
    assert pack.channels_run == ("scan",) and pack.fallback_reason == "index-missing" and pack.results
    assert [h.chunk_id for h in pack.results] == [h.chunk_id for h in scan.results]
    release._VIEWS.clear()


def test_hard_constraints_follow_the_carrier_flag_not_channel_names(fabric, monkeypatch):
    """guards against: constraints applied by a list of channel names (a new channel would escape them),
    or a dense-only search returning chunks that do not hold the required phrase."""
    q = '"lighthouse keeper" tide'
    assert fabric.search(q, channels={"dense"}).results == ()  # no carrier ran: nothing is proven
    both = fabric.search(q, channels={"dense", "word"}, debug=True)
    assert set(both.channel_rankings["dense"]) <= set(both.channel_rankings["word"])
    assert all("lighthouse keeper" in h.text.lower() for h in both.results)
    free = fabric.search("lighthouse keeper tide", channels={"dense"}, debug=True)
    assert not set(free.channel_rankings["dense"]) <= set(both.channel_rankings["word"])  # the filter did something

    monkeypatch.setattr(DenseChannel, "hard_constraint_carrier", True)
    flagged = fabric.search(q, channels={"dense", "word"}, debug=True)
    assert not set(flagged.channel_rankings["dense"]) <= set(flagged.channel_rankings["word"])
    assert fabric.search(q, channels={"dense"}).results  # a carrier now: its own ranking stands


def test_fusion_method_is_the_config_enum_and_unknown_values_are_refused(tmp_path):
    """guards against: the fusion method read from anything but the config's enum, or an unknown
    method accepted (and silently fused by RRF)."""
    assert FabricConfig().query.multilingual_fusion is FusionMethod.CONVEX
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"query": {"multilingual_fusion": "rrf"}}))
    assert FabricConfig.load(path).query.multilingual_fusion is FusionMethod.RRF
    path.write_text(json.dumps({"query": {"multilingual_fusion": "borda"}}))
    with pytest.raises(ConfigError, match="query.multilingual_fusion.*'rrf' or 'convex'"):
        FabricConfig.load(path)
    assert FabricConfig().model_dump(mode="json")["query"]["multilingual_fusion"] == "convex"


def test_the_e5_route_fuses_by_the_configured_method(fabric):
    """guards against: the e5 route's fusion chosen otherwise than by ``query.multilingual_fusion``, and
    a CJK query whose e5 channel did not run fused by the convex weights tuned for that channel."""
    home = fabric.home
    base = home.config
    try:
        for method in FusionMethod:
            home.__dict__["config"] = base.model_copy(
                update={"query": base.query.model_copy(update={"multilingual_fusion": method})})
            cfg = home.config.query
            for q in JAPANESE:
                pack = fabric.search(q, debug=True, limit=50)
                assert "dense_multilingual" in pack.channels_run, q
                lists = {k[len("channel:"):]: list(v) for k, v in pack.stage_candidates.items()
                         if k.startswith("channel:")}
                expected = (convex(lists, cfg.convex_weights) if method is FusionMethod.CONVEX
                            else rrf({k: [c for c, _ in v] for k, v in lists.items()}, cfg.rrf_k, cfg.channel_weights))
                assert list(pack.stage_candidates["fused"]) == expected[:len(pack.stage_candidates["fused"])], q
    finally:
        home.__dict__["config"] = base
    english = fabric.search(ENGLISH[0], debug=True)
    lists = {k[len("channel:"):]: [c for c, _ in v] for k, v in english.stage_candidates.items() if k.startswith("channel:")}
    assert [c for c, _ in english.stage_candidates["fused"]] == [
        c for c, _ in rrf(lists, base.query.rrf_k, base.query.channel_weights)][:len(english.stage_candidates["fused"])]


def test_stage_timings_keep_their_names(fabric):
    """guards against: stage names the benchmarks read (``lexical``, ``encode_query``…) changing."""
    en = [t.stage for t in fabric.search(ENGLISH[0]).timings]
    assert en == ["pin_and_parse", "eligibility", "lexical", "encode_query", "dense", "dense_feedback", "fusion",
                  "passages", "evidence", "total"]
    ja = [t.stage for t in fabric.search(JAPANESE[0]).timings]
    assert ja == ["pin_and_parse", "eligibility", "lexical", "encode_query_multilingual", "dense_multilingual",
                  "fusion", "passages", "evidence", "total"]


def test_the_rerank_stage_reorders_the_pool_and_keeps_the_tail(fabric):
    """guards against: the reranker stage losing its pool (``max(candidate_pool, limit)``), its input
    (the candidates' passages, heading first) or the fused order of the tail when it became a stage."""
    from fabric_query import pipeline
    from fabric_query.stages.rerank import rerank_input

    class ByLength:
        identity = "by-length"
        calls: list = []

        def score(self, query, passages):
            self.calls.append((query, list(passages)))
            return [float(len(p) % 17) for p in passages]

    home, q = fabric.home, "lighthouse storm lamp keeper"
    plain = pipeline.search(home, q, fabric.encoder, limit=3, debug=True)
    fused = [c for c, _ in plain.stage_candidates["fused"]]
    reranker = ByLength()
    pack = pipeline.search(home, q, fabric.encoder, limit=3, debug=True, reranker=reranker)
    pool = fused[: max(home.config.reranker.candidate_pool, 3)]
    assert len(reranker.calls) == 1 and reranker.calls[0][0] == q and len(reranker.calls[0][1]) == len(pool)
    scores = dict(zip(pool, reranker.score(q, reranker.calls[0][1])))
    expected = sorted(pool, key=lambda c: (-scores[c], pool.index(c))) + fused[len(pool):]
    assert [h.chunk_id for h in pack.results] == expected[:3]
    assert [c for c, _ in pack.stage_candidates["reranked"]] == expected[:len(pool)]
    assert all(h.stage_scores["rerank"] == scores[h.chunk_id] for h in pack.results)
    assert "rerank" in [t.stage for t in pack.timings]
    from fabric_query.assembly import assemble_passages
    from fabric_query.release import pinned_view

    view = pinned_view(home)
    passages, _, _, passage_of = assemble_passages(view, pool, view.sources_by_parse, home.config.passages.max_tokens,
                                                   home.config.passages.max_units)
    assert reranker.calls[0][1] == [rerank_input(passages[passage_of[c]]) for c in pool]


def test_a_request_naming_more_parses_than_the_location_cache_holds_reads_units_once_per_stage(fabric, monkeypatch):
    """guards against: citations reading the units table once per parse when a request (``limit``
    up to 1000) names more parses than the per-process location cache keeps — the cache evicted
    what the prefetch had just read, and NPL (11,429 documents) took ~7 s per 300-result query.
    The citations' locations must be the ones a roomy cache gives."""
    import fabric_query.assembly as assembly
    from fabric_resources.tables import TableStore

    roomy = fabric.search("lighthouse keeper storm boats bread", limit=20)
    parses = {h.citation.parse_id for h in roomy.results}
    assert len(parses) >= 3
    assert any(h.citation.locations for h in roomy.results)

    reads = []
    real_read = TableStore.read

    def counting_read(self, name, *args, **kwargs):
        if name == "units":
            reads.append(kwargs.get("parse_ids"))
        return real_read(self, name, *args, **kwargs)

    monkeypatch.setattr(assembly, "MAX_CACHED_LOCATION_PARSES", 1)
    monkeypatch.setattr(assembly, "_locations", type(assembly._locations)())
    monkeypatch.setattr(TableStore, "read", counting_read)
    tight = fabric.search("lighthouse keeper storm boats bread", limit=20)
    assert len(reads) <= 2, f"units read {len(reads)} times for {len(parses)} parses"
    assert [h.citation for h in tight.results] == [h.citation for h in roomy.results]
    assert [p.citation for p in tight.passages] == [p.citation for p in roomy.passages]


def test_citations_decode_only_the_units_they_name(fabric, pristine, monkeypatch):
    """guards against: a citation decoding the location of every unit of its parse (at 100k chunks
    ~15 ms a query spent on units no citation names); each decoded location is the one the stored
    unit row gives."""
    import fabric_query.assembly as assembly
    from fabric_query.locations import location_of

    monkeypatch.setattr(assembly, "_locations", type(assembly._locations)())
    decoded = []

    def counting(unit_id, *args, **kwargs):
        decoded.append(unit_id)
        return location_of(unit_id, *args, **kwargs)

    monkeypatch.setattr(assembly, "location_of", counting)
    pack = fabric.search("lighthouse keeper storm", limit=2)
    citations = [*(h.citation for h in pack.results), *(p.citation for p in pack.passages)]
    cited = {s.unit_id for c in citations for s in c.spans}
    assert cited and sorted(decoded) == sorted(cited)
    units = FabricHome(pristine / "home").tables.read("units").to_pylist()
    stored = {u["unit_id"]: u for u in units}
    for c in citations:
        assert c.locations
        for loc in c.locations:
            u = stored[loc.unit_id]
            assert loc == location_of(u["unit_id"], u["kind"], u["locator"], tuple(u["section_path"] or ()),
                                      u["attributes"])
    # A parse of three units, one of them asked for: one decoded.
    from fabric_query.release import pinned_view

    light = next(u["parse_id"] for u in units if "lenses" in u["text"])
    decoded.clear()
    monkeypatch.setattr(assembly, "_locations", type(assembly._locations)())
    located = assembly.prefetch_locations(pinned_view(FabricHome(pristine / "home")), [light])[light]
    first = next(iter(located))
    assert len(located) == 3 and located[first].unit_id == first and decoded == [first]
