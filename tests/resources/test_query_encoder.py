"""The MiniLM query encoder (ONNX Runtime) against the passage encoder (sentence-transformers).

Query and passage vectors must come from one function of the text, or cosine ranking is
meaningless; the query side only runs a different runtime to keep torch out of the process.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS

from fabric_resources.models.embedder import MiniLMEmbedder, shared_embedder
from fabric_resources.models.minilm_onnx import (
    MAX_ABS_DIFF,
    PROBES,
    QueryModelError,
    ensure_exported,
    exported_path,
)


def _texts() -> list[str]:
    texts = list(PROBES) + ["Mr. Darcy", "刘备", "  leading and trailing spaces  ", "x" * 3000]
    if CORPUS.exists():
        for name in ("text/gutenberg/1342-0_pride-and-prejudice.txt", "text/chinese/sanguoyanyi_ch01-10.utf8.txt"):
            body = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
            texts += [p for p in body.split("\n\n") if p.strip()][40:70]
    return texts


def test_query_vectors_equal_passage_vectors():
    """guards against: a query encoder that pools, normalises, truncates or tokenises differently
    from the passage encoder (long, accented, CJK, emoji and empty texts included)."""
    embedder = shared_embedder()
    texts = _texts()
    queries = embedder.encode_queries(texts)
    passages = embedder.encode_passages(texts)
    assert queries.shape == passages.shape == (len(texts), 384) and queries.dtype == np.float32
    assert float(np.abs(queries - passages).max()) <= MAX_ABS_DIFF
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    # Input order is kept, alone or in a batch of mixed lengths.
    assert np.allclose(embedder.encode_queries(texts[::-1]), queries[::-1], atol=MAX_ABS_DIFF)
    assert np.allclose(embedder.encode_queries([texts[3]])[0], queries[3], atol=MAX_ABS_DIFF)
    assert embedder.encode_queries([]).shape == (0, 384)


def test_export_is_cached_per_model_identity(tmp_path, monkeypatch):
    """guards against: two model identities sharing one exported file (a changed model answering
    queries with the old one)."""
    monkeypatch.setenv("FABRIC_MODEL_CACHE", str(tmp_path))
    identity = shared_embedder().identity
    a, b = exported_path(identity), exported_path(identity + "-other")
    assert a != b and a.parent == b.parent == tmp_path


def test_failed_export_is_a_typed_error_and_publishes_nothing(tmp_path, monkeypatch):
    """guards against: a failed export crashing with a bare traceback, hanging, or leaving a file
    that later queries would trust."""
    monkeypatch.setenv("FABRIC_MODEL_CACHE", str(tmp_path))
    with pytest.raises(QueryModelError, match="installed model is"):
        ensure_exported("all-MiniLM-L6-v2@0.0.0#not-the-installed-weights:seq256", 256)
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob(".*.tmp"))


def test_damaged_cached_export_is_replaced(tmp_path, monkeypatch):
    """guards against: a truncated or foreign file in the model cache breaking every search for
    good (it is re-exported once, and the vectors are right again)."""
    monkeypatch.setenv("FABRIC_MODEL_CACHE", str(tmp_path))
    embedder = MiniLMEmbedder()
    path = exported_path(embedder.identity)
    path.write_bytes(b"not an onnx model")
    vector = embedder.encode_queries(["a damaged cache"])
    assert path.stat().st_size > 1_000_000
    assert float(np.abs(vector - shared_embedder().encode_passages(["a damaged cache"])).max()) <= MAX_ABS_DIFF


def test_model_modules_import_no_circle():
    """guards against: the passage encoder and the ONNX query runtime importing each other (the
    export that needs both lives in its own module, ``minilm_export``); lazy imports count too."""
    import ast
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "fabric_resources" / "models"
    modules = {f"fabric_resources.models.{p.stem}": p for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = found & set(modules) - {name}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        return any(m == target or (m not in seen and reaches(m, target, seen | {m})) for m in graph[start])

    circles = sorted(m for m in graph if reaches(m, m, {m}))
    assert circles == [], circles
    assert "fabric_resources.models.embedder" not in graph["fabric_resources.models.minilm_onnx"]


def test_model_cache_is_not_writable_by_others_under_umask_000(tmp_path):
    """guards against (trial 18c): under ``umask 000`` the model cache's folders and the exported
    ONNX file were made world-writable, so another local user could swap the model every search
    loads. A fresh process with umask 0 exports into a cache three folders deep."""
    import os
    import stat
    import subprocess
    import sys

    cache = tmp_path / "a" / "b" / "models"
    code = ("import os; os.umask(0); from fabric_resources.models.embedder import MiniLMEmbedder; "
            "from fabric_resources.models.minilm_onnx import ensure_exported; e = MiniLMEmbedder(); "
            "print(ensure_exported(e.identity, e.max_seq_length))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "FABRIC_MODEL_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    exported = cache / p.stdout.strip().rsplit("/", 1)[-1]
    for path in (tmp_path / "a", tmp_path / "a" / "b", cache, exported):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert not mode & (stat.S_IWGRP | stat.S_IWOTH), f"{path} is {oct(mode)}"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_an_older_fabrics_model_cache_folders_are_made_owner_only_when_the_model_is_loaded(tmp_path, monkeypatch):
    """guards against (trial 19a): a model cache made before its folders were made ``0o700`` kept its
    old modes (``0o755``, ``0o777`` under ``umask 000``) for good: the folders exist, so nothing
    made them again, and a cached export returned before any folder was looked at. Fabric's own
    folders (``fabric``, ``models``) lose their group and other bits; the user's cache root, a
    ``FABRIC_MODEL_CACHE`` (may be shared on purpose) and a folder of another user are left as they are,
    and a chmod that fails is no error."""
    import os
    import stat

    from fabric_resources.models import minilm_onnx

    def mode(path):
        return stat.S_IMODE(path.stat().st_mode)

    xdg = tmp_path / "xdg"
    models = xdg / "fabric" / "models"
    models.mkdir(parents=True)
    for folder, old in ((xdg, 0o755), (xdg / "fabric", 0o777), (models, 0o755)):
        folder.chmod(old)
    monkeypatch.delenv("FABRIC_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    exported = exported_path("an-identity")
    exported.write_bytes(b"onnx")
    assert ensure_exported("an-identity", 128) == exported  # the cached file: no export ran
    assert (mode(xdg), mode(xdg / "fabric"), mode(models)) == (0o755, 0o700, 0o700)

    models.chmod(0o755)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # another user's folder
    minilm_onnx.ensure_model_cache_dir()
    assert mode(models) == 0o755
    monkeypatch.undo()
    monkeypatch.delenv("FABRIC_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))

    def refused(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refused)
    assert minilm_onnx.ensure_model_cache_dir() == models and mode(models) == 0o755
    monkeypatch.undo()

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv("FABRIC_MODEL_CACHE", str(shared))
    minilm_onnx.ensure_model_cache_dir()
    assert mode(shared) == 0o755
