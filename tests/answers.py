"""Comparing answers of two homes that hold the same documents but were built differently.

A dense channel's score is a float32 cosine whose last bits depend on what else shared the
passage's encode batch (the padded length and the batch size change how the model's products are
blocked) and on the matrix a query multiplies (BLAS blocking by the matrix's shape). So a file that
was ingested and then purged or withheld moves a visible cosine by ~1e-7 without moving any
rank, text, count or citation. :func:`first_difference` compares answers exactly except floats,
which must agree to ``rel`` (1e-5 by default): enough to catch a leaked document's score, which
moves BM25 statistics and ranks far more than that.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def first_difference(a: Any, b: Any, rel: float = 1e-5, path: str = "") -> str | None:
    """Where ``a`` and ``b`` first differ (a path like ``results[2].channels.dense.score``), or
    None: dicts by keys and values, lists and tuples alike by position, floats to ``rel``,
    everything else exactly."""
    if isinstance(a, float) and isinstance(b, float):
        return None if math.isclose(a, b, rel_tol=rel, abs_tol=rel * 1e-3) else f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())}"
        for k in a:
            found = first_difference(a[k], b[k], rel, f"{path}.{k}" if path else str(k))
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, rel, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def answers_in_fresh_process(root: Path, queries: list[str], *, debug: bool = False, resolve: bool = False) -> dict:
    """Each query's EvidencePack (``limit`` 10, JSON, timings aside) from a query process of its own
    on the home at ``root`` (no view or cache of this process in between); with ``resolve``, also
    ``"<query> resolve"``: each hit's ``resolve`` status."""
    code = ("import json\nfrom fabric_query import Fabric\n"
            f"fabric, out = Fabric({str(root)!r}), {{}}\n"
            f"for q in {queries!r}:\n"
            f"    pack = fabric.search(q, limit=10, debug={debug!r}).model_dump(mode='json')\n"
            "    pack.pop('timings')\n"
            "    out[q] = pack\n"
            + ("    out[q + ' resolve'] = [fabric.resolve(h['citation']).status for h in pack['results']]\n"
               if resolve else "")
            + "print(json.dumps(out, ensure_ascii=False))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])
