"""Shared fixtures: the ../shared folder, isolated Fabric homes, in-process ingest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests are seeded: the same examples on every run and in CI (a random draw once found a
# one-character GB18030 file, two bytes no decoder can tell from windows-1251, and failed a run
# that changed nothing near it). Each test's own settings (max_examples, deadline) still apply.
settings.register_profile("fabric", derandomize=True)
settings.load_profile("fabric")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus"
EVAL = SHARED / "eval"


def need_shared(path: Path = CORPUS) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is provided on project machines and in CI)")
    return path


@pytest.fixture
def fabric_home(tmp_path, monkeypatch):
    """A fresh Fabric home (and its Dagster instance) under tmp_path."""
    from fabric_resources.home import FabricHome

    home_dir = tmp_path / "home"
    monkeypatch.setenv("FABRIC_HOME", str(home_dir))
    monkeypatch.setenv("DAGSTER_HOME", str(home_dir / "dagster"))
    return FabricHome(home_dir)


def ingest(path: Path, home):
    """Run `fabric ingest` in-process (real Dagster runs in the home's instance)."""
    from fabric_assets.ingest import ingest as run

    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    return run(path, home)


def ingest_versions(path: Path, home, *texts: str) -> None:
    """Write each of ``texts`` to the file ``path`` in turn (its folder made), ingesting the folder
    after each: a file whose earlier versions' parses are superseded. Every ingest must fail nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in texts:
        path.write_text(text)
        assert ingest(path.parent, home).failed_runs == []


def ingested_files(parent: Path, files: dict[str, str]):
    """Write ``files`` (name to UTF-8 text) into ``<parent>/corpus``, ingest it into
    ``<parent>/home`` and return that home (a :class:`~fabric_resources.home.FabricHome`)."""
    from fabric_resources.home import FabricHome

    folder = parent / "corpus"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    home = FabricHome(parent / "home")
    ingest(folder, home)
    return home


# --------------------------------------------------------------------------
# Services (PostgreSQL, moto's S3) for the storage backends; started once per session.

@pytest.fixture(scope="session")
def postgres_server():
    """A throw-away PostgreSQL cluster on loopback (skips where the server binaries are absent)."""
    from fabric_assets.measurement.local_services import PostgresServer, ServiceUnavailable

    try:
        server = PostgresServer().start()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_s3():
    """moto's S3 server on loopback (it enforces conditional writes, as Lance's commits need)."""
    from fabric_assets.measurement.local_services import MotoS3Server, ServiceUnavailable

    try:
        server = MotoS3Server().start()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres-s3"])
def any_home(request, fabric_home):
    """The default home (``fabric_home``), and one whose catalog and Dagster instance are on
    PostgreSQL and whose tables are on S3: a shared deployment, whose catalog locks are PostgreSQL
    advisory locks."""
    import json

    from fabric_assets.measurement.local_services import shared_storage
    from fabric_resources.home import FabricHome

    if request.param == "sqlite":
        return fabric_home
    storage = shared_storage(request.getfixturevalue("postgres_server"), request.getfixturevalue("moto_s3"))
    fabric_home.root.mkdir(parents=True, exist_ok=True)
    fabric_home.layout.config_file.write_text(json.dumps({"storage": storage}))
    home = FabricHome(fabric_home.root)
    request.addfinalizer(home.catalog.close)
    return home


@pytest.fixture(scope="session")
def postgres_catalog_db(postgres_server):
    """One database for the catalog tests; each test gets its own schema in it."""
    return postgres_server.create_database("catalog")


def open_test_catalog(backend: str, tmp_path: Path, request, *, read_only: bool = False):
    """A fresh catalog of ``backend`` (``sqlite`` in tmp_path, ``postgres`` in a schema of its own)."""
    from fabric_resources.catalog import PostgresCatalog, SqliteCatalog

    if backend == "sqlite":
        return SqliteCatalog(tmp_path / "catalog.sqlite3", read_only=read_only)
    import uuid

    url = request.getfixturevalue("postgres_catalog_db")
    catalog = PostgresCatalog(url, schema=f"t_{uuid.uuid4().hex[:12]}", read_only=read_only)
    request.addfinalizer(catalog.close)
    return catalog


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request, tmp_path):
    """A fresh catalog of each backend: the catalog tests run against both."""
    return open_test_catalog(request.param, tmp_path, request)


def reopened(catalog, *, read_only: bool):
    """Another handle on the same catalog (e.g. a query process's read-only one)."""
    from fabric_resources.catalog import PostgresCatalog, SqliteCatalog

    if isinstance(catalog, SqliteCatalog):
        return SqliteCatalog(catalog.path, read_only=read_only)
    return PostgresCatalog(catalog.url, schema=catalog.schema, read_only=read_only)
