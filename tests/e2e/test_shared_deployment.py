"""Fabric past one host, proven on this one: the catalog and the Dagster instance on a real
PostgreSQL, the Lance tables on moto's S3 server (``storage`` in ``config.json``;
``docs/scale.md``). The embedded default stays what it was: no service, the same files, the same
config hash."""

from __future__ import annotations

import collections
import json
import multiprocessing as mp
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from fabric_resources.config import ConfigError, FabricConfig, config_hash
from fabric_resources.home import FabricHome

DOCUMENTS = {
    "harbour/lighthouse.txt": "The lighthouse keeper climbed the tower every evening to light the lamp.\n\n"
                              "During the storm the keeper kept the light turning until dawn.",
    "harbour/boats.md": "# Boats\n\nThe fishing fleet came home at dusk, guided by the northern light.",
    "kitchen/bread.txt": "Sourdough needs flour, water and patience.\n\nFeed the starter before mixing.",
}


def _write(folder: Path, documents: dict[str, str]) -> Path:
    for rel, text in documents.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def _shared_home(tmp: Path, postgres, s3, **config) -> Path:
    from fabric_assets.measurement.local_services import shared_storage

    home_dir = tmp / "home"
    home_dir.mkdir(parents=True)
    storage = shared_storage(postgres, s3, max_concurrent_runs=2)
    (home_dir / "config.json").write_text(json.dumps({"storage": storage, **config}))
    return home_dir


@pytest.fixture
def dagster_env(monkeypatch):
    """Restores FABRIC_HOME / DAGSTER_HOME, which an ingest sets for the process."""
    def use(home_dir: Path) -> None:
        monkeypatch.setenv("FABRIC_HOME", str(home_dir))
        monkeypatch.setenv("DAGSTER_HOME", str(home_dir / "dagster"))
    return use


# ==========================================================================
# The default is today's, and configuration is checked


def todays_dagster_yaml(dagster_home) -> str:
    """The default dagster.yaml: as before storage was configurable, plus the batched SQLite event
    log (Dagster's default shard folder under this instance's folder) and the compute-log manager
    whose children a Ctrl-C leaves alone (Dagster's default folder too)."""
    return f"""\
# Written by Fabric. The instance lives under the Fabric home.
telemetry:
  enabled: false
nux:
  enabled: false
event_log_storage:
  module: fabric_assets.event_log
  class: FabricSqliteEventLogStorage
  config:
    dagster_home: "{dagster_home.resolve()}"
compute_logs:
  module: fabric_assets.compute_logs
  class: FabricComputeLogManager
  config:
    base_dir: "{dagster_home.resolve() / 'storage'}"
"""


def test_default_home_is_the_embedded_configuration(tmp_path):
    """guards against: the default configuration needing a service, or its files changing."""
    from fabric_resources.catalog import SqliteCatalog

    home = FabricHome(tmp_path / "home")
    assert (home.layout.dagster_home / "dagster.yaml").read_text() == todays_dagster_yaml(home.layout.dagster_home)
    assert isinstance(home.catalog, SqliteCatalog) and home.catalog.path == home.layout.catalog_file
    assert not home.tables.remote and home.tables.root == home.layout.tables
    assert home.exists()


def test_storage_never_enters_a_config_hash(tmp_path):
    """guards against: the new section changing the default config's hash (it enters release
    manifests and identities), or where the data lives changing any identity."""
    default = FabricConfig()
    moved = FabricConfig.model_validate({"storage": {
        "catalog": {"backend": "postgres", "url": "postgresql://u@db.example:5432/fabric"},
        "dagster": {"backend": "postgres", "max_concurrent_runs": 8},
        "tables_uri": "s3://bucket/fabric/tables", "tables_storage_options": {"region": "eu-west-1"}}})
    assert moved.storage.catalog.backend == "postgres"
    assert "storage" not in default.model_dump()
    assert config_hash(moved) == config_hash(default) == config_hash(default.model_dump(mode="json"))
    assert config_hash(moved.parsers) == config_hash(default.parsers)


@pytest.mark.parametrize("storage, message", [
    ({"catalog": {"backend": "postgres"}}, "needs storage.catalog.url"),
    ({"dagster": {"backend": "postgres"}}, "needs storage.dagster.url"),
    ({"catalog": {"backend": "postgres", "url": "mysql://x/y"}}, "String should match pattern"),
    ({"tables_uri": "gs://bucket/t"}, "unsupported scheme"),
    ({"tables_uri": "s3://"}, "names no bucket"),
    ({"catalog": {"backend": "postgres", "url": "postgresql://h/d", "schema_name": "x; DROP"}}, "pattern"),
    ({"tables": "s3://b"}, "Extra inputs are not permitted"),
    ({"dagster": {"max_concurrent_runs": 0}}, "greater than 0"),
])
def test_bad_storage_settings_are_refused(tmp_path, storage, message):
    """guards against: a storage setting that fails later (or silently falls back to the default)."""
    (tmp_path / "config.json").write_text(json.dumps({"storage": storage}))
    with pytest.raises(ConfigError, match=message):
        FabricConfig.load(tmp_path / "config.json")


def test_storage_options_file_must_be_owner_only(tmp_path):
    """guards against: object-store credentials read from a file others can read, or echoed in errors."""
    from fabric_resources.tables import StorageOptionsError

    secret = tmp_path / "s3.json"
    secret.write_text(json.dumps({"aws_secret_access_key": "hunter2"}))
    secret.chmod(0o644)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.json").write_text(json.dumps({"storage": {
        "tables_uri": "s3://b/t", "tables_storage_options_file": str(secret)}}))
    with pytest.raises(StorageOptionsError, match="owner-only") as err:
        FabricHome(tmp_path / "home").tables
    assert "hunter2" not in str(err.value)
    secret.chmod(0o600)
    assert FabricHome(tmp_path / "home").tables.storage_options == {"aws_secret_access_key": "hunter2"}


def test_dagster_yaml_follows_the_config_but_never_a_users_own(tmp_path):
    """guards against: a stale instance file after storage.dagster changes (runs recorded in the
    wrong store), a database URL left world-readable, or Fabric overwriting a hand-written file."""
    home_dir = tmp_path / "home"
    yaml = home_dir / "dagster" / "dagster.yaml"
    FabricHome(home_dir)
    (home_dir / "config.json").write_text(json.dumps({"storage": {"dagster": {
        "backend": "postgres", "url": "postgresql://u:pw@127.0.0.1:5/d", "max_concurrent_runs": 3}}}))
    FabricHome(home_dir)
    text = yaml.read_text()
    assert '"postgresql+psycopg2://u:pw@127.0.0.1:5/d"' in text and "max_concurrent_runs: 3" in text
    assert stat.S_IMODE(yaml.stat().st_mode) == 0o600
    (home_dir / "config.json").unlink()
    FabricHome(home_dir)
    assert yaml.read_text() == todays_dagster_yaml(yaml.parent)
    yaml.write_text("storage:\n  sqlite:\n    base_dir: /elsewhere\n")  # the user's own
    (home_dir / "config.json").write_text(json.dumps({"storage": {"dagster": {"max_concurrent_runs": 2}}}))
    FabricHome(home_dir)
    assert yaml.read_text() == "storage:\n  sqlite:\n    base_dir: /elsewhere\n"


# ==========================================================================
# On PostgreSQL and S3


@pytest.fixture(scope="module")
def ingested(postgres_server, moto_s3, tmp_path_factory):
    """A home whose catalog and Dagster instance are on PostgreSQL and whose tables are on S3, after
    a real ``fabric ingest`` (fabric_assets.ingest.ingest) of DOCUMENTS."""
    from fabric_assets.ingest import ingest

    tmp = tmp_path_factory.mktemp("shared")
    home_dir = _shared_home(tmp, postgres_server, moto_s3)
    corpus = _write(tmp / "corpus", DOCUMENTS)
    with pytest.MonkeyPatch.context() as mp_:
        mp_.setenv("FABRIC_HOME", str(home_dir))
        mp_.setenv("DAGSTER_HOME", str(home_dir / "dagster"))
        summary = ingest(corpus, FabricHome(home_dir))
    return home_dir, corpus, summary


def test_ingest_and_query_end_to_end_on_postgres_and_s3(ingested, moto_s3, dagster_env):
    """guards against: any piece of the pipeline still writing the home directory's SQLite files or
    local tables when storage names shared stores, or the read side not finding them there."""
    import dagster as dg
    import psycopg2

    from fabric_query import Fabric

    home_dir, corpus, summary = ingested
    dagster_env(home_dir)
    assert summary.complete and summary.run_ids and not summary.failed_runs
    home = FabricHome(home_dir)
    # Nothing shared lives in the home directory: no catalog file, no tables, no Dagster SQLite.
    assert sorted(p.name for p in home_dir.iterdir()) == ["artifacts", "config.json", "dagster", "indexes"]
    assert not list((home_dir / "dagster").rglob("*.db"))
    release = home.catalog.current_release()
    assert len(release.manifest["sources"]) == len(DOCUMENTS)
    # The release pins the S3 tables' versions.
    bucket = home.config.storage.tables_uri.split("/")[2]
    keys = moto_s3.keys(bucket)
    for table in ("units", "chunks", "lexical_documents", "chunk_vectors"):
        assert any(k.startswith(f"tables/{table}.lance/_versions/") for k in keys), table
        assert home.tables.version(table) == release.manifest["tables"][table]
    # The runs are in the PostgreSQL instance.
    instance = dg.DagsterInstance.get()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert {r.run_id for r in instance.get_runs()} >= set(summary.run_ids) | {summary.activation_run_id}
    con = psycopg2.connect(home.config.storage.catalog.url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT count(*) FROM runs")
            assert cur.fetchone()[0] >= len(summary.run_ids) + 1
            cur.execute("SELECT count(*) FROM fabric.releases")
            assert cur.fetchone()[0] == 1
    finally:
        con.close()
    # A real search and resolve through fabric_query.
    fabric = Fabric(home_dir)
    pack = fabric.search("lighthouse keeper")
    assert pack.results and pack.results[0].citation.source_key == "fs:corpus/harbour/lighthouse.txt"
    assert pack.fallback_reason is None
    assert fabric.resolve(pack.results[0].citation).status == "verified"
    (corpus / "harbour" / "lighthouse.txt").write_text("changed", encoding="utf-8")
    try:
        assert fabric.resolve(pack.results[0].citation).status == "stale"
    finally:
        (corpus / "harbour" / "lighthouse.txt").write_text(DOCUMENTS["harbour/lighthouse.txt"], encoding="utf-8")


def test_a_second_home_directory_serves_the_same_release(ingested, tmp_path, dagster_env):
    """guards against: a query process elsewhere (another home directory with the same storage)
    serving another release, nothing, or a silent empty answer because the serving index is
    local to the home that built it: it answers from the shared tables and says why."""
    from fabric_query import Fabric

    home_dir, _, _ = ingested
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "config.json").write_text((home_dir / "config.json").read_text())
    dagster_env(other)
    here, there = Fabric(home_dir).search("lighthouse keeper"), Fabric(other).search("lighthouse keeper")
    assert there.release_id == here.release_id
    assert there.fallback_reason == "index-missing"
    assert [r.citation.chunk_id for r in there.results][:1] == [r.citation.chunk_id for r in here.results][:1]
    assert Fabric(other).resolve(there.results[0].citation).status == "verified"


@pytest.mark.parametrize("change, problem", [
    ({"tables_uri": "s3://no-such-bucket-here/tables"}, "bucket-missing (NoSuchBucket)"),
    ({"tables_storage_options": {"endpoint": "http://127.0.0.1:1"}}, "unreachable"),
])
def test_status_says_the_object_store_is_down_not_that_the_tables_were_altered(ingested, tmp_path, dagster_env,
                                                                                change, problem):
    """guards against: `fabric status` listing every table as "not found" or "ValueError" with the
    remedy `fabric snapshot restore` (which shared storage cannot do) when the bucket is gone or the
    store does not answer: a deployment fault, nothing was altered."""
    from fabric_query import Fabric

    home_dir, _, _ = ingested
    config = json.loads((home_dir / "config.json").read_text())
    for key, value in change.items():
        config["storage"][key] = {**config["storage"][key], **value} if isinstance(value, dict) else value
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(config))
    dagster_env(other)
    (entry,) = Fabric(other).status().unreadable_tables
    assert entry.startswith("every table: the object store cannot be used: " + problem), entry


def test_the_instance_is_postgres_with_a_queued_run_limit(ingested, dagster_env):
    """guards against: storage.dagster writing a file Dagster does not read as meant (runs recorded
    in SQLite, or no limit on how many runs the daemon starts at once)."""
    import dagster as dg

    home_dir, _, _ = ingested
    dagster_env(home_dir)
    instance = dg.DagsterInstance.get()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 2


# ==========================================================================
# Two parse runs at once


def _parse_run_process(home_dir: str, tags: dict, start, results) -> None:
    """One parse run, as a run worker executes it; puts (run ID, success) or (traceback, False)."""
    try:
        os.environ["FABRIC_HOME"] = home_dir
        os.environ["DAGSTER_HOME"] = str(Path(home_dir) / "dagster")
        import dagster as dg

        from fabric_assets.ingest import _run_config, job
        from fabric_resources.dagster_resources import FAKE_MODELS  # concurrent writes, not the models, are tested

        home = FabricHome(home_dir)
        parse_job = job(home, "parse_job", FAKE_MODELS)
        instance = dg.DagsterInstance.get()
        start.wait(120)
        result = parse_job.execute_in_process(instance=instance, tags=tags, raise_on_error=False,
                                              run_config=_run_config(home))
        results.put((result.run_id, result.success))
    except BaseException:  # the parent must not wait out its timeout on a child that died
        import traceback

        results.put((traceback.format_exc(), False))
        raise


def test_two_parse_runs_write_the_same_tables_at_once(postgres_server, moto_s3, tmp_path, dagster_env):
    """guards against: concurrent parse runs (what the queued run coordinator starts) losing or
    doubling a partition's rows in any table, or a run's catalog writes lost to the other's."""
    import dagster as dg

    from fabric_assets.activation.activate import activate
    from fabric_assets.sensors import source_change_sensor
    from fabric_resources.dagster_resources import FabricHomeResource
    from fabric_resources.schema import TABLES

    docs = {f"d{i}.txt": f"Document {i} about the harbour, the tide and lamp number {i}.\n\nSecond paragraph {i}."
            for i in range(4)}
    home_dir = _shared_home(tmp_path, postgres_server, moto_s3, sources={"partitions_per_run": 2})
    dagster_env(home_dir)
    home = FabricHome(home_dir)
    home.catalog.register_root(_write(tmp_path / "corpus", docs))
    instance = dg.DagsterInstance.get()
    # What the daemon does on a sensor tick: add the partitions, then one run per request.
    result = source_change_sensor(dg.build_sensor_context(instance=instance, resources={
        "fabric": FabricHomeResource(home=str(home_dir))}))
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    assert len(result.run_requests) == 2
    parse_ids = {s.parse_id for s in home.catalog.sources()}
    assert len(parse_ids) == 4

    ctx = mp.get_context("spawn")  # lancedb's runtime is not fork-safe
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_parse_run_process, args=(str(home_dir), r.tags, start, results))
             for r in result.run_requests]
    for p in procs:
        p.start()
    start.set()
    finished = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    assert [ok for _, ok in finished] == [True, True], [run for run, ok in finished if not ok]
    records = {r.dagster_run.run_id: r for r in instance.get_run_records()}
    (a, b) = (records[run_id] for run_id, _ in finished)
    assert a.start_time < b.end_time and b.start_time < a.end_time  # they ran at the same time

    # Every partition exactly once in every table it has rows in, and consistent across tables.
    by_table = {}
    for name in TABLES:
        t = home.tables.read(name)
        if not t.num_rows:
            continue
        id_col = next(c for c in t.column_names if c.endswith("_id") and c != "parse_id")
        keys = collections.Counter(zip(t.column("parse_id").to_pylist(), t.column(id_col).to_pylist()))
        assert set(keys.values()) == {1}, name
        by_table[name] = keys
    for name in ("units", "chunks", "lexical_documents", "chunk_vectors", "context_windows", "colbert_windows"):
        assert {p for p, _ in by_table[name]} == parse_ids, name
    for pid in parse_ids:
        chunks = {c for p, c in by_table["chunks"] if p == pid}
        assert {c for p, c in by_table["lexical_documents"] if p == pid} == chunks
        assert {c for p, c in by_table["chunk_vectors"] if p == pid} == chunks
        assert sum(1 for p, _ in by_table["units"] if p == pid) == home.catalog.parse_run(pid).counts["units"]
    report = activate(home)
    assert report.published and len(report.activated) == 4
    assert {r.status for r in home.catalog.parse_runs()} == {"ready"}


# ==========================================================================
# Failures and the lifecycle on PostgreSQL and S3


def _cli(*argv: str) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_a_catalog_that_cannot_be_opened_is_one_line_without_the_password(postgres_server, tmp_path):
    """guards against: a CatalogUnavailableError traceback (exit 1, the code of 'stale') from every
    command when the PostgreSQL catalog's database does not exist or its server is down."""
    home = tmp_path / "home"
    home.mkdir()
    for url, reason in ((postgres_server.url("no_such_db").replace("fabric@", "fabric:hunter2@"), "does not exist"),
                        ("postgresql://fabric:hunter2@127.0.0.1:1/fabric", "Connection refused")):
        (home / "config.json").write_text(json.dumps({"storage": {"catalog": {"backend": "postgres", "url": url}}}))
        for argv in (["status"], ["search", "x"], ["cleanup"]):
            out = _cli(*argv, "--home", str(home))
            assert out.returncode == 2 and reason in out.stderr, (argv, out.stderr)
            assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
            assert "hunter2" not in out.stderr + out.stdout
        assert not (home / "catalog.sqlite3").exists()


def test_a_dagster_database_that_cannot_be_used_is_one_line(postgres_server, moto_s3, tmp_path):
    """guards against: a 200-line traceback ending in dagster-postgres's "too many retries for DB
    connection" (exit 1), which hides the reason, when storage.dagster.url names a database that
    does not exist, a refused password or a server that is down."""
    home_dir = _shared_home(tmp_path, postgres_server, moto_s3)
    config = json.loads((home_dir / "config.json").read_text())
    config["storage"]["dagster"]["url"] = postgres_server.url("no_such_dagster_db").replace("fabric@", "fabric:hunter2@")
    (home_dir / "config.json").write_text(json.dumps(config))
    out = _cli("ingest", str(_write(tmp_path / "corpus", DOCUMENTS)), "--home", str(home_dir))
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the Dagster instance's PostgreSQL database cannot be used") and \
        'database "no_such_dagster_db" does not exist' in last, out.stderr
    assert "Traceback" not in out.stderr and "hunter2" not in out.stderr
    assert FabricHome(home_dir).catalog.current_release() is None


def test_purge_on_postgres_and_s3_removes_the_text_from_every_version(ingested, moto_s3, tmp_path, dagster_env):
    """guards against: the lifecycle commands answering "no Fabric home" on a home whose catalog is
    on PostgreSQL (they looked for catalog.sqlite3), and purge then failing with a SnapshotError
    traceback part-way (its safety snapshot needs local storage; it left an empty catalog.sqlite3
    in the home), so a deleted file's text could never be purged there; and a purge run from
    another home directory on the same storage leaving the raw bytes in the ingesting home's
    artifact store for good (its cleanup now removes what a finished purge names)."""
    import hashlib

    import lance
    import psycopg2

    from fabric_assets.ingest import ingest

    home_dir, corpus, _ = ingested
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "config.json").write_text((home_dir / "config.json").read_text())
    digest = hashlib.sha256(DOCUMENTS["kitchen/bread.txt"].encode()).hexdigest()
    assert FabricHome(home_dir).artifacts.path_for(digest).exists()
    dagster_env(home_dir)
    (corpus / "kitchen" / "bread.txt").unlink()
    try:
        assert ingest(corpus, FabricHome(home_dir)).complete
        out = _cli("purge", "--source", "fs:corpus/kitchen/bread.txt", "--json", "--home", str(other))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["sources"] == ["fs:corpus/kitchen/bread.txt"]
        out = _cli("snapshot", "create", "--home", str(home_dir))
        assert out.returncode == 2 and "snapshots need the default storage" in out.stderr, out.stderr
        assert FabricHome(home_dir).artifacts.path_for(digest).exists()  # another home's: out of reach
        out = _cli("cleanup", "--json", "--home", str(home_dir))
        assert out.returncode == 0 and json.loads(out.stdout)["artifacts_removed"] == 1, out.stderr
    finally:
        _write(corpus, {"kitchen/bread.txt": DOCUMENTS["kitchen/bread.txt"]})
    home = FabricHome(home_dir)
    assert not home.artifacts.path_for(digest).exists()
    assert not (home_dir / "catalog.sqlite3").exists() and not (other / "catalog.sqlite3").exists()
    storage = home.config.storage
    bucket = storage.tables_uri.split("/")[2]
    client = moto_s3.client()
    for key in moto_s3.keys(bucket):
        assert b"Sourdough" not in client.get_object(Bucket=bucket, Key=key)["Body"].read(), key
    for name in ("units", "chunks", "lexical_documents"):
        ds = lance.dataset(home.tables.uri(name), storage_options=home.tables.storage_options)
        assert len(ds.versions()) == 1, name
        assert not any("Sourdough" in str(v) for v in ds.to_table().to_pylist()), name
    con = psycopg2.connect(storage.catalog.url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT count(*) FROM fabric.sources WHERE source_key LIKE '%bread%'")
            assert cur.fetchone()[0] == 0
    finally:
        con.close()


def test_an_object_store_that_cannot_be_used_stops_ingest_at_once_in_one_line(postgres_server, moto_s3, tmp_path):
    """guards against: an ingest into a missing bucket (Lance reads it as a table never written)
    running its whole pipeline, minutes of retried writes, and ending in a traceback; and an
    unreachable store doing the same."""
    from fabric_resources.tables import TableStore, TableStoreUnavailableError

    home_dir = _shared_home(tmp_path, postgres_server, moto_s3)
    config = json.loads((home_dir / "config.json").read_text())
    config["storage"]["tables_uri"] = "s3://no-such-bucket-here/tables"
    (home_dir / "config.json").write_text(json.dumps(config))
    corpus = _write(tmp_path / "corpus", DOCUMENTS)
    started = time.monotonic()
    out = _cli("ingest", str(corpus), "--home", str(home_dir))
    assert out.returncode == 2, out.stderr
    assert "s3://no-such-bucket-here/tables cannot be used: bucket-missing (NoSuchBucket)" in out.stderr
    assert "Traceback" not in out.stderr and "testing" not in out.stderr  # no credential either
    assert time.monotonic() - started < 60
    assert FabricHome(home_dir).catalog.current_release() is None
    down = TableStore("s3://bucket/tables", {**moto_s3.storage_options(), "endpoint": "http://127.0.0.1:1"})
    with pytest.raises(TableStoreUnavailableError, match="unreachable") as err:
        down.check_available()
    assert err.value.reason == "unreachable"
    TableStore(f"s3://{moto_s3.create_bucket()}/tables", moto_s3.storage_options()).check_available()  # new: fine


def test_repair_on_s3_re_derives_a_data_file_cut_short(ingested, moto_s3, dagster_env):
    """guards against: `fabric repair` working on local tables only. A chunks data file cut short
    in the bucket is dropped and its rows re-derived; the release serves the same chunks."""
    import lance

    from fabric_assets.ingest import ingest
    from fabric_query import Fabric

    home_dir, corpus, _ = ingested
    dagster_env(home_dir)
    home = FabricHome(home_dir)
    ingest(corpus, home)  # what earlier tests changed in the folder is taken in first: the repair's own ingest adds nothing

    def served_chunks() -> list:
        version = FabricHome(home_dir).catalog.current_release().manifest["tables"]["chunks"]
        rows = home.tables.dataset("chunks", version).to_table(columns=["parse_id", "chunk_id"]).to_pylist()
        return sorted((r["parse_id"], r["chunk_id"]) for r in rows)

    before = served_chunks()
    ds = lance.dataset(home.tables.uri("chunks"), storage_options=home.tables.storage_options)
    bucket, _, prefix = home.tables.uri("chunks").removeprefix("s3://").partition("/")
    key = f"{prefix}/data/{ds.get_fragments()[0].data_files()[0].path}"
    client = moto_s3.client()
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    client.put_object(Bucket=bucket, Key=key, Body=body[: len(body) // 2])
    assert Fabric(home_dir).status().unreadable_tables
    out = _cli("repair", "--home", str(home_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    assert Fabric(home_dir).status().unreadable_tables == ()
    assert served_chunks() == before
