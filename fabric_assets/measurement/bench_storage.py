"""Ingest on the default (embedded) storage against the shared one, in one run (``docs/scale.md``).

``fabric bench storage [PATH] [--repeat N]`` ingests PATH (default: the sample
corpus) into fresh homes: one on the default configuration (SQLite catalog, local Lance tables,
SQLite Dagster instance) and one with the catalog and the Dagster instance on a throw-away
PostgreSQL cluster and the tables on moto's S3 server, both on loopback
(``fabric_assets.measurement.local_services``), alternating, after one warm-up ingest that loads the models.
Prints the ingest seconds of each (median over ``--repeat``), their ratio, and a check that a
search of each home answers and its first citation verifies.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _ingest(corpus: Path, home_dir: Path, storage: dict | None) -> dict:
    from fabric_assets.ingest import ingest
    from fabric_query import Fabric
    from fabric_resources.home import FabricHome

    home_dir.mkdir(parents=True)
    if storage is not None:
        (home_dir / "config.json").write_text(json.dumps({"storage": storage}))
    os.environ["FABRIC_HOME"] = str(home_dir)
    os.environ["DAGSTER_HOME"] = str(home_dir / "dagster")
    home = FabricHome(home_dir)
    started = time.perf_counter()
    summary = ingest(corpus, home)
    seconds = time.perf_counter() - started
    fabric = Fabric(home_dir)
    pack = fabric.search("lighthouse keeper")
    verified = bool(pack.results) and fabric.resolve(pack.results[0].citation).status == "verified"
    return {"seconds": seconds, "runs": len(summary.run_ids), "complete": summary.complete,
            "parses": len(summary.scan.parse_ids_to_run), "verified": verified}


def run(corpus: Path, repeat: int = 1) -> dict:
    """Ingest ``corpus`` ``repeat`` times on each storage; return the figures (seconds are medians)."""
    from fabric_assets.measurement.local_services import MotoS3Server, PostgresServer, shared_storage

    postgres, s3 = PostgresServer().start(), MotoS3Server().start()
    try:
        with tempfile.TemporaryDirectory(prefix="fabric-bench-storage-") as tmp:
            work = Path(tmp)
            _ingest(corpus, work / "warm-up", None)  # loads the models once for both
            out: dict[str, list[dict]] = {"default": [], "postgres+s3": []}
            for i in range(repeat):
                out["default"].append(_ingest(corpus, work / f"default-{i}", None))
                out["postgres+s3"].append(_ingest(corpus, work / f"shared-{i}", shared_storage(postgres, s3)))
    finally:
        s3.stop()
        postgres.stop()
    figures = {name: {"seconds": statistics.median(r["seconds"] for r in runs),
                      "all_seconds": [round(r["seconds"], 2) for r in runs],
                      "runs": runs[0]["runs"], "parses": runs[0]["parses"],
                      "complete": all(r["complete"] for r in runs), "verified": all(r["verified"] for r in runs)}
               for name, runs in out.items()}
    figures["ratio"] = figures["postgres+s3"]["seconds"] / figures["default"]["seconds"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fabric_assets.measurement.bench_storage", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, help="folder to ingest (default: the sample corpus)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="fabric-bench-corpus-") as tmp:
        corpus = args.path
        if corpus is None:
            from fabric_assets.sample_corpus import write_sample_corpus

            corpus = write_sample_corpus(Path(tmp) / "sample")
        figures = run(corpus.resolve(), args.repeat)
    for name in ("default", "postgres+s3"):
        f = figures[name]
        print(f"{name:12s} ingest {f['seconds']:7.2f} s (runs {f['all_seconds']}), {f['parses']} parses in "
              f"{f['runs']} parse runs, complete={f['complete']}, search+resolve verified={f['verified']}")
    print(f"ratio postgres+s3 / default: {figures['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
