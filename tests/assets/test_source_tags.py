"""A parse partition found by its file name: the run tags Dagster's UI searches, ``fabric status
--source``, and the tags leaving Dagster with what they name (retention; purge: tests/assets/test_purge.py).

The UI is asked as it asks (GraphQL through the workspace's code location, ``tests/dagster_ui.py``):
the Runs page's Tag filter lists tag keys (``RunTagKeysQuery``), then the values of the key picked
(``RunTagValuesQuery``), each narrowed by what is typed, then filters the runs by ``key=value``.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest
from dagster_ui import query, ui
from typer.testing import CliRunner

from fabric_assets.ingest import dagster_instance
from fabric_assets.ingest import ingest as run_ingest
from fabric_assets.lifecycle.retention import cleanup
from fabric_assets.source_tags import forget_source_tags, tag_run
from fabric_resources.dagster_resources import FAKE_MODELS  # which model embeds is not what this is about
from fabric_resources.home import FabricHome
from fabric_resources.run_tags import SOURCE_TAG_PREFIX, source_key_of_tag, source_tag_key
from fabric_resources.tombstones import source_key_hash

TAG_KEYS = "{ runTagKeysOrError { ... on RunTagKeys { keys } } }"
TAG_VALUES = "query($keys: [String!]!) { runTagsOrError(tagKeys: $keys) { ... on RunTags { tags { key values } } } }"
RUNS = """query($key: String!, $value: String!) { runsOrError(filter: {tags: [{key: $key, value: $value}]}) {
  ... on Runs { results { runId pipelineName } } } }"""


def _typed(context, text: str) -> dict[str, set[str]]:
    """What the Tag filter offers once ``text`` is typed: matching keys with their values."""
    keys = [k for k in query(context, TAG_KEYS)["runTagKeysOrError"]["keys"] if text.lower() in k.lower()]
    if not keys:
        return {}
    tags = query(context, TAG_VALUES, keys=keys)["runTagsOrError"]["tags"]
    return {t["key"]: set(t["values"]) for t in tags}


def _runs(context, key: str, value: str) -> set[tuple[str, str]]:
    """The runs the filter ``tag:key=value`` shows, as (job, run ID)."""
    results = query(context, RUNS, key=key, value=value)["runsOrError"]["results"]
    return {(r["pipelineName"], r["runId"]) for r in results}


def _parse(home, key: str) -> str:
    return home.catalog.source(key).parse_id


def test_a_partition_is_found_by_its_file_name_in_the_dagster_ui_and_the_cli(tmp_path, fabric_home):
    """guards against: a parse partition findable in the UI only by its hash (issue 18, "a parse
    partition can be found by its file name"); a key the UI's filter cannot carry (it splits at the
    first "="); a moved file (no parse run) or a second version not findable under its name; the
    CLI not naming the partitions."""
    src = tmp_path / "corpus"
    (src / "notes").mkdir(parents=True)
    (src / "日本").mkdir()
    (src / "notes" / "lighthouse.txt").write_text("The lighthouse keeper wrote tide tables.\n")
    (src / "notes" / "a=b 100%.txt").write_text("Sourdough bread needs flour and water.\n")
    (src / "日本" / "灯台.txt").write_text("灯台守は毎晩らせん階段を上りました。\n")
    first = run_ingest(src, fabric_home, models=FAKE_MODELS)
    assert first.complete and len(first.run_ids) == 1
    (parse_run,) = first.run_ids
    instance = dagster_instance(fabric_home)
    light, odd, ja = "fs:corpus/notes/lighthouse.txt", "fs:corpus/notes/a=b 100%.txt", "fs:corpus/日本/灯台.txt"
    with ui(instance) as context:
        found = _typed(context, "lighthouse")
        assert found == {source_tag_key(light): {_parse(fabric_home, light)}}
        assert _runs(context, source_tag_key(light), _parse(fabric_home, light)) == {("parse_job", parse_run)}
        (key,) = _typed(context, "a%3Db 100%25")
        assert "=" not in key and source_key_of_tag(key) == odd
        assert _runs(context, key, _parse(fabric_home, odd)) == {("parse_job", parse_run)}
        assert _typed(context, "灯台") == {source_tag_key(ja): {_parse(fabric_home, ja)}}

    # A second version: a new partition under the same name. A move: the partition is reused
    # without a parse run, and the activation run that takes it in carries the new name.
    old_light = _parse(fabric_home, light)
    (src / "notes" / "lighthouse.txt").write_text("The lighthouse keeper wrote tide tables twice.\n")
    (src / "日本" / "灯台.txt").rename(src / "日本" / "灯台2.txt")
    second = run_ingest(src, FabricHome(fabric_home.root), models=FAKE_MODELS)
    home = FabricHome(fabric_home.root)
    assert second.complete and len(second.run_ids) == 1
    moved = "fs:corpus/日本/灯台2.txt"
    assert _parse(home, moved) == _parse(home, ja)
    with ui(instance) as context:
        assert _typed(context, "lighthouse") == {source_tag_key(light): {old_light, _parse(home, light)}}
        assert _runs(context, source_tag_key(light), _parse(home, light)) == {("parse_job", second.run_ids[0])}
        assert _typed(context, "灯台2") == {source_tag_key(moved): {_parse(home, ja)}}
        assert _runs(context, source_tag_key(moved), _parse(home, ja)) == {("activation_job", second.activation_run_id)}
    # Runs that only re-read their partitions' sources add nothing new.
    assert not any(k.startswith(SOURCE_TAG_PREFIX) for k in instance.get_run_by_id(first.activation_run_id).tags)

    # The CLI: from part of a file name to the partitions, and the tag to type in the UI.
    out = CliRunner().invoke(__import__("fabric_query.cli", fromlist=["read_app"]).read_app,
                             ["status", "--source", "LIGHTHOUSE", "--json", "--home", str(home.root)])
    assert out.exit_code == 0, out.output
    (entry,) = json.loads(out.output)
    assert entry["source_key"] == light and entry["run_tag"] == source_tag_key(light)
    assert [(p["parse_id"], p["current"], p["active"]) for p in entry["partitions"]] == [
        (old_light, False, False), (_parse(home, light), True, True)]
    text = CliRunner().invoke(__import__("fabric_query.cli", fromlist=["read_app"]).read_app,
                              ["status", "--source", "灯台", "--home", str(home.root)])
    assert text.exit_code == 0 and _parse(home, ja) in text.output and source_tag_key(moved) in text.output
    none = CliRunner().invoke(__import__("fabric_query.cli", fromlist=["read_app"]).read_app,
                              ["status", "--source", "no-such-file", "--home", str(home.root)])
    assert none.exit_code == 1 and "no source matches" in none.output


def test_retention_removes_the_tags_of_the_parses_it_removes(tmp_path, fabric_home):
    """guards against: a deleted file's name staying in Dagster's run tags after the retention
    cleanup removed its last version, or a cleanup taking the tags of what it keeps."""
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "keep.txt").write_text("The harbour master counted the herring boats.\n")
    (src / "gone.txt").write_text("Quixotic zebras signed a manifesto.\n")
    run_ingest(src, fabric_home, models=FAKE_MODELS)
    gone, keep = _parse(fabric_home, "fs:corpus/gone.txt"), _parse(fabric_home, "fs:corpus/keep.txt")
    (src / "gone.txt").unlink()
    run_ingest(src, fabric_home, models=FAKE_MODELS)
    instance = dagster_instance(fabric_home)

    def tags() -> dict[str, set[str]]:
        keys = [k for k in instance.get_run_tag_keys() if k.startswith(SOURCE_TAG_PREFIX)]
        return {k: v for k, v in instance.get_run_tags(tag_keys=keys)} if keys else {}

    assert tags() == {source_tag_key("fs:corpus/gone.txt"): {gone}, source_tag_key("fs:corpus/keep.txt"): {keep}}
    fabric_home.layout.config_file.write_text(json.dumps({"retention": {"deleted_days": 0, "releases": 1,
                                                                        "release_days": 0}}))
    home = FabricHome(fabric_home.root)
    report = cleanup(home, instance=instance)
    assert report.removed["deleted"] == [gone] and report.run_tags_removed == 1
    assert tags() == {source_tag_key("fs:corpus/keep.txt"): {keep}}
    runs = instance.get_runs()
    assert not any(k == source_tag_key("fs:corpus/gone.txt") for r in runs for k in r.tags)


@pytest.fixture(params=["sqlite", "postgres"])
def instance(request, tmp_path):
    """A Dagster instance on SQLite (Fabric's default) or PostgreSQL (dagster-postgres)."""
    folder = tmp_path / "dagster"
    folder.mkdir()
    text = "telemetry:\n  enabled: false\n"
    if request.param == "postgres":
        from fabric_resources.catalog.postgres import sqlalchemy_url

        url = request.getfixturevalue("postgres_server").create_database("tags")
        text += f"storage:\n  postgres:\n    postgres_url: {json.dumps(sqlalchemy_url(url))}\n"
    (folder / "dagster.yaml").write_text(text)
    with dg.DagsterInstance.from_config(str(folder)) as inst:
        yield inst


@dg.op(config_schema={"source_keys": [str]})
def _named(context) -> None:
    pass


@dg.job
def _named_job() -> None:
    _named()


def test_forgetting_removes_every_copy_of_a_name_from_the_run_storage(instance):
    """guards against: a purged name left in a run's stored body (the UI shows the run's tags from
    it), in the tag table or in a run's config (purge_job's own); other names removed with it; a tag
    written twice; on either storage Fabric supports."""
    secret, other = "fs:corpus/secret/plan.txt", "fs:corpus/keep.txt"
    runs = []
    for keys in ([secret], [other]):
        result = _named_job.execute_in_process(instance=instance,
                                               run_config={"ops": {"_named": {"config": {"source_keys": keys}}}})
        runs.append(result.run_id)
    assert tag_run(instance, runs[0], {secret: "p1", other: "p2"}) == 2
    assert tag_run(instance, runs[0], {secret: "p1"}) == 0  # already there
    assert tag_run(instance, runs[1], {secret: "p1", other: "p2"}, only_untagged=True) == 0  # run 0 has both
    assert tag_run(instance, runs[1], {secret: "p3"}, only_untagged=True) == 1

    removed = forget_source_tags(instance, source_key_hashes=[source_key_hash(secret)], parse_ids=[])
    assert removed == 2
    first, second = (instance.get_run_by_id(r) for r in runs)
    assert first.tags.get(source_tag_key(other)) == "p2" and source_tag_key(secret) not in first.tags
    assert source_tag_key(secret) not in second.tags
    assert first.run_config["ops"]["_named"]["config"]["source_keys"] == [f"purged:{source_key_hash(secret)}"]
    assert second.run_config["ops"]["_named"]["config"]["source_keys"] == [other]
    keys = instance.get_run_tag_keys()
    assert source_tag_key(secret) not in keys and source_tag_key(other) in keys
    # By partition (the retention cleanup's way): the other name goes with its partition.
    assert forget_source_tags(instance, parse_ids=["p2"]) == 1
    assert instance.get_run_tags(tag_keys=[source_tag_key(other)]) == []
    assert not any(k.startswith(SOURCE_TAG_PREFIX) for r in runs for k in instance.get_run_by_id(r).tags)
    assert forget_source_tags(instance) == 0
