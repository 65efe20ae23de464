"""``fabric eval-tune DIR [DIR ...]``: the query-time defaults, chosen on the dev halves of several
collections at once by their worst collection.

Every collection is ingested through the real pipeline into ``<work_dir>/<name>/home`` (the home
``fabric eval --work-dir <work_dir>/<name>`` uses, so a second run is a no-op scan). For each
**pass** — the settings that change what a channel returns (:class:`PassSettings`: word-channel
feedback, query term frequency, query stop words, section-guided dense, the dense channel's window
mix and its vector feedback; for a CJK collection the bigram BM25 parameters) — every dev query runs once through ``fabric_query`` and the channel
lists it returns are kept; each **fusion** (:class:`FusionSettings`: RRF k and the dense weight on
the MiniLM route, the lexical weight of the e5 route's convex combination, floor demotion on or off)
then fuses them again with :func:`fabric_query.fusion.fuse`, the function a search uses, with the
pass's below-floor candidates (``EvidencePack.below_floor_candidates``).

A point of the grid is one pass and one fusion for each route; a collection is scored under the
settings its queries use (an English collection ignores the bigram BM25 and the convex weight, a
CJK one the feedback and the MiniLM fusion). Its **margin** on a collection is Fabric's fused
nDCG@10 minus the best of the baselines ``fabric eval`` runs (bm25s, flat cosine, LanceDB FTS, LanceDB hybrid,
over the same chunks and the same dev queries) and of Fabric's own channels alone under that pass.
The **leximin** point maximises the smallest margin over the collections, then the second smallest
and so on (:func:`choose`), then prefers the current defaults. A dev half of 15-50 queries cannot
resolve that order at the bottleneck: the point chosen is therefore the one with the largest mean
margin among those the dev queries cannot tell from the leximin point on its worst-case guarantee,
within one paired standard error on every collection (:func:`within_noise`, the one-standard-error
rule). On the five dev halves the leximin point alone carried worse (NPL, left out, −0.0048; its
test half's interval against LanceDB hybrid excluded 0; docs/ranking.md, "Choosing within the noise").
Leave-one-collection-out (each collection scored by the point the same rule chooses on the others)
says how well the choice carries to a collection it never saw.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fabric_assets.ingest import ingest
from fabric_assets.measurement.baselines import Baselines
from fabric_assets.measurement.harness import (
    DEPTH, QueryVectorMemo, Split, WorkDirError, as_free_text, check_work_dir_name, claimed_work_dir,
    collection_is_cjk, document_ranker, judged_queries, load_beir, write_corpus,
)
from fabric_assets.measurement.metrics import per_query_ndcg, score_run
from fabric_query import pipeline
from fabric_query.fusion import fuse
from fabric_query.release import release_view
from fabric_resources.config import Bm25Config, FabricConfig, FusionMethod, QueryConfig
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder
from fabric_resources.models.multilingual import shared_multilingual_embedder

#: The dense window mix tuning and ``fabric eval``'s ``fabric[+window]`` try beside off: Callan's
#: (1994) equal mix of passage and document evidence, not a tuned value.
WINDOW_MIX = 0.5
#: The dense vector feedback weights tuning tries beside off (``query.dense_feedback_weight``), and the
#: one ``fabric eval``'s ``fabric[+feedback]`` tries when it is off.
FEEDBACK_WEIGHTS = (0.5, 1.0)
#: The dense channels of each route, as the pipeline names them.
ENGLISH_DENSE, CJK_DENSE = "dense", "dense_multilingual"


@dataclass(frozen=True)
class PassSettings:
    """Query-time settings that change the channel lists (one pass of every query per value).

    ``feedback``: ``off``, ``idf`` or ``rm3`` (:class:`fabric_query.channels.lexical.Feedback`,
    with the configured docs, terms and weight); ``bigram_bm25``: (k1, b) for CJK queries or None
    for tantivy's 1.2 / 0.75; ``dense_window_weight``: the MiniLM dense channel's share of the
    context window's cosine (``query.dense_window_weight``); ``dense_feedback``: the weight of the
    feedback documents in its moved query vector (``query.dense_feedback_weight``). The feedback
    documents come from a fixed plain RRF of the pass's channel lists, so re-fusing a pass under
    another fusion gives what a search with both settings returns.
    """

    feedback: str = "idf"
    query_term_frequency: bool = False
    stopwords: str = "none"
    section_guided: bool = True
    bigram_bm25: tuple[float, float] | None = (0.5, 0.3)
    dense_window_weight: float = 0.0
    dense_feedback: float = 0.0

    def apply(self, q: QueryConfig, cjk: bool) -> QueryConfig:
        update: dict = {"query_term_frequency": self.query_term_frequency, "stopwords": self.stopwords,
                        "channel_depth": DEPTH}
        if cjk:
            update["bigram_bm25"] = Bm25Config(k1=self.bigram_bm25[0], b=self.bigram_bm25[1]) if self.bigram_bm25 else None
        else:
            update["section_guided"] = self.section_guided
            update["dense_window_weight"] = self.dense_window_weight
            update["dense_feedback_weight"] = self.dense_feedback
            if self.feedback == "off":
                update["feedback_terms"] = 0
            else:
                update["feedback_method"] = self.feedback
                update["feedback_terms"] = q.feedback_terms or QueryConfig().feedback_terms
        return q.model_copy(update=update)

    def relevant(self, cjk: bool) -> PassSettings:
        """These settings with those a collection's queries do not depend on at their defaults: CJK
        queries take no feedback (``query.feedback_multilingual``), no section-guided route and no
        window mix or vector feedback of the MiniLM model; other queries no bigram BM25."""
        default = PassSettings()
        if cjk:
            return replace(self, feedback=default.feedback, section_guided=default.section_guided,
                           dense_window_weight=default.dense_window_weight, dense_feedback=default.dense_feedback)
        return replace(self, bigram_bm25=default.bigram_bm25)


@dataclass(frozen=True)
class FusionSettings:
    """RRF ``rrf_k`` and the dense channel's weight (MiniLM route); the lexical channels' weight
    ``convex_lexical`` of the e5 route's convex combination (its dense channel gets 1 − that);
    ``floor_demotion``: hits below the dense floor with no lexical match after the rest (both routes)."""

    rrf_k: int = 60
    dense_weight: float = 0.75
    convex_lexical: float = 0.4
    floor_demotion: bool = True

    def apply(self, q: QueryConfig) -> QueryConfig:
        weights = {**q.channel_weights, ENGLISH_DENSE: self.dense_weight}
        convex = {name: self.convex_lexical for name in ("word", "substring", "scan", "graph")}
        convex[CJK_DENSE] = round(1.0 - self.convex_lexical, 4)
        return q.model_copy(update={"rrf_k": self.rrf_k, "channel_weights": weights, "convex_weights": convex,
                                    "floor_demotion": self.floor_demotion})

    def relevant(self, cjk: bool) -> FusionSettings:
        """These settings with those of the other route at their defaults."""
        default = FusionSettings()
        if cjk:
            return replace(self, rrf_k=default.rrf_k, dense_weight=default.dense_weight)
        return replace(self, convex_lexical=default.convex_lexical)


@dataclass(frozen=True)
class Grid:
    """The values :func:`tune` tries (its product)."""

    feedback: tuple[str, ...] = ("off", "idf", "rm3")
    query_term_frequency: tuple[bool, ...] = (False, True)
    stopwords: tuple[str, ...] = ("none", "english")
    section_guided: tuple[bool, ...] = (True, False)
    bigram_bm25: tuple[tuple[float, float] | None, ...] = ((0.5, 0.3), (0.9, 0.4), None)
    dense_window_weight: tuple[float, ...] = (0.0, WINDOW_MIX)
    dense_feedback: tuple[float, ...] = (0.0, *FEEDBACK_WEIGHTS)
    rrf_k: tuple[int, ...] = (20, 60)
    dense_weight: tuple[float, ...] = (0.75, 1.0, 1.5)
    convex_lexical: tuple[float, ...] = (0.3, 0.4, 0.5)
    floor_demotion: tuple[bool, ...] = (True, False)

    def passes(self) -> list[PassSettings]:
        return [PassSettings(*v) for v in itertools.product(
            self.feedback, self.query_term_frequency, self.stopwords, self.section_guided, self.bigram_bm25,
            self.dense_window_weight, self.dense_feedback)]

    def fusions(self) -> list[FusionSettings]:
        return [FusionSettings(*v) for v in itertools.product(self.rrf_k, self.dense_weight, self.convex_lexical,
                                                              self.floor_demotion)]


def defaults_of(config: QueryConfig) -> tuple[PassSettings, FusionSettings]:
    """The grid point that ``config`` is (raises ``ValueError`` when its values are not grid values:
    weights beyond the dense one, convex weights that are not one lexical weight and its complement)."""
    feedback = "off" if not config.feedback_terms else config.feedback_method
    bigram = (config.bigram_bm25.k1, config.bigram_bm25.b) if config.bigram_bm25 else None
    lexical = config.convex_weights.get("word", 0.4)
    if abs(config.convex_weights.get(CJK_DENSE, 0.6) - (1 - lexical)) > 1e-9:
        raise ValueError("convex weights are not a lexical weight and its complement")
    return (PassSettings(feedback, config.query_term_frequency, config.stopwords, config.section_guided, bigram,
                         config.dense_window_weight, config.dense_feedback_weight),
            FusionSettings(config.rrf_k, config.channel_weights.get(ENGLISH_DENSE, 1.0), lexical, config.floor_demotion))


@dataclass
class CollectionScores:
    """One collection's dev-half scores: baselines, and per relevant pass its channels alone and per
    relevant fusion Fabric's fused nDCG@10."""

    name: str
    cjk: bool
    queries: int
    baselines: dict[str, float]
    channels: dict[PassSettings, dict[str, float]] = field(default_factory=dict)
    fused: dict[tuple[PassSettings, FusionSettings], float] = field(default_factory=dict)
    #: The same points' fused nDCG@10 per query (one order of the judged queries for every point), and
    #: per query the baselines' and each pass's channels' (the rivals of :meth:`margin`).
    per_query: dict[tuple[PassSettings, FusionSettings], tuple[float, ...]] = field(default_factory=dict)
    baselines_per_query: dict[str, tuple[float, ...]] = field(default_factory=dict)
    channels_per_query: dict[PassSettings, dict[str, tuple[float, ...]]] = field(default_factory=dict)

    def margins_per_query(self, p: PassSettings, f: FusionSettings) -> list[float] | None:
        """Per query, fused nDCG@10 minus that of the rival :meth:`margin` subtracts (the best baseline
        or channel on the mean); None without per-query scores."""
        p, f = p.relevant(self.cjk), f.relevant(self.cjk)
        fused = self.per_query.get((p, f))
        rivals = {**self.baselines, **self.channels[p]}
        best = max(rivals, key=rivals.__getitem__)
        rival = (self.baselines_per_query if best in self.baselines else self.channels_per_query.get(p, {})).get(best)
        if fused is None or rival is None:
            return None
        return [u - v for u, v in zip(fused, rival)]

    def paired_se(self, a: tuple[PassSettings, FusionSettings], b: tuple[PassSettings, FusionSettings]) -> float:
        """Standard error of the mean per-query difference of the margins of points ``a`` and ``b``
        (:meth:`margins_per_query`: each point's fused nDCG@10 minus its own rival's, so a rival
        channel that a pass changes counts too; sample standard deviation / sqrt(n)); 0 with fewer
        than two queries or no per-query scores."""
        x, y = self.margins_per_query(*a), self.margins_per_query(*b)
        if not x or not y or len(x) < 2:
            return 0.0
        return statistics.stdev(u - v for u, v in zip(x, y)) / len(x) ** 0.5

    def margin(self, p: PassSettings, f: FusionSettings) -> float:
        """Fused nDCG@10 minus the best baseline or channel alone (negative: something beat Fabric)."""
        p, f = p.relevant(self.cjk), f.relevant(self.cjk)
        rivals = [*self.baselines.values(), *self.channels[p].values()]
        return self.fused[(p, f)] - max(rivals)


def score_collection(folder: Path, work_dir: Path, grid: Grid, split: Split = "dev",
                     limit_queries: int | None = None, base: FabricConfig | None = None) -> CollectionScores:
    """Ingest ``folder`` into ``work_dir/<name>/home`` and score every relevant pass and fusion of
    ``grid`` on its ``split`` queries (the first ``limit_queries``), with ``base``'s other settings
    (default: the embedded defaults, written to the home's ``config.json``)."""
    collection = load_beir(folder)
    qids = judged_queries(collection, split)[:limit_queries]
    scratch = Path(work_dir) / collection.name
    with claimed_work_dir(scratch, collection):  # refuses a folder an eval did not make, or one in use
        home = FabricHome(scratch / "home")
        # Always written: a home left with another config (``fabric eval --config``) would skew every pass.
        home.layout.config_file.write_text((base or FabricConfig()).model_dump_json())
        names = write_corpus(collection, scratch / collection.name)
        ingest(scratch / collection.name, home)
        view = release_view(home, home.catalog.current_release())
        docs = document_ranker(view, collection, names)

        def ndcg(run: dict[str, list[str]]) -> float:
            return score_run(run, collection.qrels)["nDCG@10"]

        def per_query(run: dict[str, list[str]]) -> tuple[float, ...]:
            scores = per_query_ndcg(run, collection.qrels)
            return tuple(scores[q] for q in qids)

        cjk = collection_is_cjk(collection)
        embedder = QueryVectorMemo(shared_embedder(home.config.dense.batch_size))
        multilingual = QueryVectorMemo(shared_multilingual_embedder())
        encoder = multilingual if cjk else embedder
        qvecs = dict(zip(qids, encoder.encode_queries([collection.queries[q] for q in qids]))) if qids else {}
        baselines = Baselines(view, scratch, cjk)
        baselines.build()
        baseline_runs = {name: {q: docs(system(collection.queries[q], qvecs[q])) for q in qids}
                         for name, system in baselines.systems.items()}
        scores = CollectionScores(collection.name, cjk, len(qids),
                                  {name: ndcg(run) for name, run in baseline_runs.items()},
                                  baselines_per_query={name: per_query(run) for name, run in baseline_runs.items()})

        start = home.config
        try:
            for p in dict.fromkeys(p.relevant(cjk) for p in grid.passes()):
                home.__dict__["config"] = start.model_copy(update={"query": p.apply(start.query, cjk)})
                lists: dict[str, dict[str, list[tuple[str, float]]]] = {}
                below: dict[str, tuple[str, ...]] = {}
                for q in qids:
                    pack = pipeline.search(home, as_free_text(collection.queries[q]), embedder, limit=1, debug=True,
                                           multilingual=multilingual)
                    lists[q] = {k.split(":", 1)[1]: list(v) for k, v in pack.stage_candidates.items()
                                if k.startswith("channel:")}
                    below[q] = pack.below_floor_candidates
                channels = sorted({c for per in lists.values() for c in per})
                channel_runs = {c: {q: docs(i for i, _ in lists[q].get(c, [])) for q in qids} for c in channels}
                scores.channels[p] = {c: ndcg(run) for c, run in channel_runs.items()}
                scores.channels_per_query[p] = {c: per_query(run) for c, run in channel_runs.items()}
                for f in dict.fromkeys(f.relevant(cjk) for f in grid.fusions()):
                    config = f.apply(home.config.query)
                    run = {}
                    for q, per in lists.items():
                        method = config.multilingual_fusion if CJK_DENSE in per else FusionMethod.RRF
                        ranked = fuse(method, {n: [c for c, _ in v] for n, v in per.items()}, per, config, below[q])
                        run[q] = docs(c for c, _ in ranked)
                    scores.fused[(p, f)] = ndcg(run)
                    scores.per_query[(p, f)] = per_query(run)
        finally:
            home.__dict__["config"] = start
        return scores


@dataclass(frozen=True)
class Choice:
    """A grid point with its margin on each collection."""

    passes: PassSettings
    fusion: FusionSettings
    margins: dict[str, float]

    @property
    def worst(self) -> float:
        return min(self.margins.values())

    @property
    def mean(self) -> float:
        return sum(self.margins.values()) / len(self.margins) if self.margins else 0.0


def choose(collections: Sequence[CollectionScores], grid: Grid,
           prefer: tuple[PassSettings, FusionSettings] | None = None) -> list[Choice]:
    """Every point of ``grid`` with its margins on ``collections``, best first by leximin: the
    largest smallest margin, then the largest second-smallest, and so on (so a collection whose
    margin no setting moves — the other route's — does not leave the choice to chance); then
    ``prefer`` (the current defaults); then the grid's own order (deterministic). Margins are
    compared to 1e-9."""
    points = []
    for order, (p, f) in enumerate(itertools.product(grid.passes(), grid.fusions())):
        margins = {c.name: c.margin(p, f) for c in collections}
        points.append((Choice(p, f, margins), order))
    return [c for c, _ in sorted(points, key=lambda t: (tuple(-round(m, 9) for m in sorted(t[0].margins.values())),
                                                       (t[0].passes, t[0].fusion) != prefer, t[1]))]


def admitted(collections: Sequence[CollectionScores], ranked: Sequence[Choice]) -> list[Choice]:
    """The points, in ``ranked``'s order, that the dev queries cannot tell from the leximin choice
    ``ranked[0]`` on its worst-case guarantee: on every collection the point's margin is at least the
    choice's worst margin minus one paired standard error of the two points' per-query margins there
    (:meth:`CollectionScores.paired_se`: each point's fused run minus its own rival; the
    one-standard-error rule of Breiman et al. 1984, CART §3.4.3). With no collections, ``ranked[0]``."""
    best = ranked[0]
    if not collections:  # nothing to be noisy on (leave-one-out of a single collection)
        return [best]
    key = (best.passes, best.fusion)

    def admissible(c: Choice) -> bool:
        return all(c.margins[col.name] >= best.worst - 1e-9  # the standard error only where it is needed
                   or c.margins[col.name] >= best.worst - col.paired_se((c.passes, c.fusion), key) - 1e-9
                   for col in collections)

    return [c for c in ranked if admissible(c)]


def best_mean(points: Sequence[Choice]) -> Choice:
    """The point with the largest mean margin; ties keep the order of ``points``."""
    return max(points, key=lambda c: round(c.mean, 9))


def within_noise(collections: Sequence[CollectionScores], ranked: Sequence[Choice]) -> Choice:
    """The point with the largest mean margin among :func:`admitted` (which holds ``ranked[0]``)."""
    return best_mean(admitted(collections, ranked))


def leave_one_out(collections: Sequence[CollectionScores], grid: Grid,
                  prefer: tuple[PassSettings, FusionSettings] | None = None) -> dict[str, Choice]:
    """For each collection, the point chosen on the others (:func:`choose`, then :func:`within_noise`),
    with its margins on all."""
    out = {}
    for held in collections:
        rest = [c for c in collections if c is not held]
        best = within_noise(rest, choose(rest, grid, prefer))
        out[held.name] = Choice(best.passes, best.fusion, {c.name: c.margin(best.passes, best.fusion)
                                                           for c in collections})
    return out


def report(collections: Sequence[CollectionScores], grid: Grid, current: QueryConfig) -> dict:
    """The chosen point (:func:`within_noise` of the leximin order), the leximin point, the current
    defaults' margins, leave-one-collection-out, the top points by leximin."""
    prefer = defaults_of(current)
    ranked = choose(collections, grid, prefer)
    pool = admitted(collections, ranked)
    chosen = best_mean(pool)
    lead = (ranked[0].passes, ranked[0].fusion)
    defaults = next(c for c in ranked if (c.passes, c.fusion) == prefer) if _in_grid(prefer, grid) else None

    def row(c: Choice) -> dict:
        return {"passes": asdict(c.passes), "fusion": asdict(c.fusion), "worst_margin": round(c.worst, 4),
                "mean_margin": round(c.mean, 4), "margins": {k: round(v, 4) for k, v in c.margins.items()}}

    return {
        "collections": [{"name": c.name, "cjk": c.cjk, "dev_queries": c.queries,
                         "baselines": {k: round(v, 4) for k, v in c.baselines.items()}} for c in collections],
        "chosen": row(chosen),
        "leximin": row(ranked[0]),
        # How wide the noise was: the points admitted, and per collection one paired standard error
        # of the chosen point's margins against the leximin point's.
        "admitted_points": len(pool),
        "standard_errors": {c.name: round(c.paired_se((chosen.passes, chosen.fusion), lead), 4) for c in collections},
        "defaults": row(defaults) if defaults else None,
        "defaults_reproduced": (chosen.passes, chosen.fusion) == prefer,
        "leave_one_out": {name: {**row(c), "held_out_margin": round(c.margins[name], 4)}
                          for name, c in leave_one_out(collections, grid, prefer).items()},
        "top": [row(c) for c in ranked[:10]],
        "points": len(ranked),
    }


def _in_grid(point: tuple[PassSettings, FusionSettings], grid: Grid) -> bool:
    return point[0] in grid.passes() and point[1] in grid.fusions()


def tune(folders: Sequence[Path], work_dir: Path, grid: Grid = Grid(), split: Split = "dev",
         limit_queries: int | None = None) -> dict:
    """Score ``grid`` on the ``split`` half of every collection in ``folders`` and choose by the worst
    collection (:func:`report`). ``limit_queries`` caps each collection's queries (its first ones).

    Raises
    ------
    BeirFormatError
        A collection unreadable, or with no judged query in ``split`` (it took part with margin 0,
        which as the worst margin decided the leximin choice), checked before any ingest.
    WorkDirError
        Two folders of one name (one work dir and one report name for both), or a name the work dir
        uses itself (:func:`~fabric_assets.measurement.harness.check_work_dir_name`).
    """
    seen: dict[str, Path] = {}
    for f in folders:  # each is ingested into <work_dir>/<its name>, and reported by name
        name = Path(os.path.abspath(f)).name
        if name in seen:
            raise WorkDirError(f"{seen[name]} and {f} are both named {name!r}: they would share "
                               f"{Path(work_dir) / name} and one name in the report; give each its own folder name")
        seen[name] = Path(f)
        collection = load_beir(Path(f))  # a malformed, unjudged or misnamed collection fails before any ingest
        judged_queries(collection, split)
        check_work_dir_name(collection)
    collections = [score_collection(Path(f), Path(work_dir), grid, split, limit_queries) for f in folders]
    return report(collections, grid, FabricConfig().query)
