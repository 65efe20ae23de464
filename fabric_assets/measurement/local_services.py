"""Throw-away services on loopback for tests and benchmarks: a PostgreSQL cluster and moto's S3
server (``docs/scale.md``).

Each starts on a free 127.0.0.1 port in a temp dir and is stopped (and its files removed) by
``stop``. ``tests/conftest.py`` holds them session-scoped, so the suite pays once, and skips with
the reason where the binaries are absent (CI installs them: ``.ci/setup``);
``fabric_assets.measurement.bench_storage`` starts its own. Nothing here is used by a Fabric deployment.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


class ServiceUnavailable(RuntimeError):
    """The binaries of a service are not installed here (the message says which)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen | None, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s} s")


def postgres_bindir() -> Path:
    """The newest installed PostgreSQL server's ``bin`` (Debian: ``/usr/lib/postgresql/N/bin``),
    or ``$FABRIC_PG_BINDIR``.

    Raises
    ------
    ServiceUnavailable
        If no ``initdb`` + ``pg_ctl`` pair is found.
    """
    candidates = [Path(os.environ["FABRIC_PG_BINDIR"])] if os.environ.get("FABRIC_PG_BINDIR") else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                         key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    raise ServiceUnavailable("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's "
                             "postgresql package (.ci/setup does) or set FABRIC_PG_BINDIR")


class PostgresServer:
    """A PostgreSQL cluster in a temp dir, listening on 127.0.0.1 only, trust auth for user
    ``fabric`` (nothing else can reach it). ``initdb`` refuses to run as root, so as root the
    cluster runs as the ``postgres`` system user (Debian's package makes it) or ``nobody``."""

    user = "fabric"

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="fabric-pg-"))
        self.port = 0
        self._as: list[str] = []

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self._as, *args], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> "PostgresServer":
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise ServiceUnavailable("running as root without runuser: cannot start PostgreSQL as another user")
            name = "postgres"
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                name, entry = "nobody", pwd.getpwnam("nobody")
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            self._as = [runuser, "-u", name, "--"]
        data = self.dir / "data"
        self._run(str(self.bindir / "initdb"), "-D", str(data), "-U", self.user, "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        self.port = free_port()
        # A throw-away cluster: durability off (fsync, full-page writes), enough connections for the
        # pools of several worker processes.
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "server.log"), "-w",
                  "-t", "60", "-o", options, "start")
        _wait_for_port(self.port, None, 30, "postgres")
        return self

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        import psycopg2

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        con = psycopg2.connect(self.url())
        try:
            con.autocommit = True
            with con.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            con.close()
        return self.url(name)

    def stop(self) -> None:
        data = self.dir / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run([*self._as, str(self.bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                            "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


class MotoS3Server:
    """moto's S3 server (``moto_server``, which enforces S3's conditional writes, as Lance's commits
    need) on a free loopback port."""

    region = "us-east-1"
    access_key = "testing"
    secret_key = "testing"

    def __init__(self) -> None:
        exe = Path(sys.executable).parent / "moto_server"
        if not exe.exists():
            raise ServiceUnavailable(f"{exe} not found: moto[server] is a dev dependency (pip install -e .[dev])")
        self.exe = exe
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MotoS3Server":
        self.port = free_port()
        self.proc = subprocess.Popen([str(self.exe), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_for_port(self.port, self.proc, 60, "moto_server")
        return self

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    def create_bucket(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def storage_options(self) -> dict[str, str]:
        """Lance's object-store options for this server."""
        return {"endpoint": self.endpoint, "allow_http": "true", "aws_access_key_id": self.access_key,
                "aws_secret_access_key": self.secret_key, "region": self.region}

    def keys(self, bucket: str) -> list[str]:
        out, token = [], None
        while True:
            kw = {"Bucket": bucket, **({"ContinuationToken": token} if token else {})}
            page = self.client().list_objects_v2(**kw)
            out += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def shared_storage(postgres: PostgresServer, s3: MotoS3Server, *, max_concurrent_runs: int | None = None) -> dict:
    """A ``storage`` section for ``config.json`` that puts a home's shared state on these
    services: the catalog and the Dagster instance in a new database, the tables in a new bucket."""
    url = postgres.create_database("fabric")
    dagster: dict = {"backend": "postgres"}
    if max_concurrent_runs is not None:
        dagster["max_concurrent_runs"] = max_concurrent_runs
    return {"catalog": {"backend": "postgres", "url": url}, "dagster": dagster,
            "tables_uri": f"s3://{s3.create_bucket('fabric')}/tables", "tables_storage_options": s3.storage_options()}
