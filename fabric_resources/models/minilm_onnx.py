"""all-MiniLM-L6-v2 query encoding on ONNX Runtime, without torch in the query process.

Why: in the query process, importing sentence-transformers (torch, transformers and what they
pull in: accelerate, scikit-learn, SciPy, pandas) and loading the model took ~450 MB of RSS and
11–15 ms per Cranfield question on one thread. An ONNX Runtime session of the same weights takes
~136 MB and 7–8 ms (``docs/benchmarks.md``, "Query encoder runtime").

The ONNX graph is exported from the very ``SentenceTransformer`` the ingest side embeds passages
with (:mod:`fabric_resources.models.minilm_export`, run in a subprocess so the query process never
imports torch). The export is published only after it reproduced that model's vectors on probe
texts (:data:`MAX_ABS_DIFF`) with the same token IDs, and is cached per model identity and
exporter versions in :func:`model_cache_dir`. A failed export raises :class:`QueryModelError`; the
query side never falls back silently. This module loads and runs the export; it imports neither
torch nor the passage encoder.

Tokenisation uses the model's own ``tokenizer.json`` through the ``tokenizers`` library, truncated
at the embedder's ``max_seq_length`` word pieces, as sentence-transformers does.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from fabric_resources.locks import exclusive_lock
from fabric_resources.schema import DENSE_DIM

#: Largest |ONNX − sentence-transformers| vector component accepted at export (vectors are
#: unit-norm; float32 reordering noise measured ~2e-7).
MAX_ABS_DIFF = 1e-5
OPSET = 17
#: An export took ~16 s on 2 cores (imports included, machine busy); past this it is stuck.
EXPORT_TIMEOUT_S = 600
INPUTS = ("input_ids", "attention_mask", "token_type_ids")

#: Probe texts the export must reproduce: English, accents, CJK, emoji, an empty string and one
#: past the 256-word-piece truncation.
PROBES = (
    "pressure distribution on a swept wing at supersonic speeds",
    "Café naïve façade — Ærøskøbing, São Paulo, İstanbul",
    "吾輩は猫である。名前はまだ無い。東京タワーの高さは333メートル",
    "¿Dónde está la biblioteca? 🙂 ✓ ℌ ﬁ",
    "",
    " ".join(["boundary-layer transition and laminar separation bubbles"] * 60),
)


class QueryModelError(RuntimeError):
    """The ONNX query model could not be exported or verified (the message says why)."""


def model_cache_dir() -> Path:
    """``$FABRIC_MODEL_CACHE``, else ``$XDG_CACHE_HOME/fabric/models``, else ``~/.cache/fabric/models``.

    Raises
    ------
    QueryModelError
        If none is set and the user has no home folder (``HOME`` unset and the user ID has no
        passwd entry, as a container run under an arbitrary ID): pathlib's bare ``RuntimeError``
        was a traceback from every search.
    """
    if os.environ.get("FABRIC_MODEL_CACHE"):
        return Path(os.environ["FABRIC_MODEL_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "fabric" / "models"
    try:
        home = Path.home()
    except (RuntimeError, KeyError) as exc:
        raise QueryModelError(f"no folder to cache the query model in: {exc} (HOME is not set and user ID "
                              f"{os.getuid()} has no passwd entry); set FABRIC_MODEL_CACHE or HOME") from exc
    return home / ".cache" / "fabric" / "models"


def ensure_model_cache_dir() -> Path:
    """:func:`model_cache_dir`, each missing folder of it made ``0o700`` whatever the umask.

    ``mkdir -p`` makes the parents with the umask's permissions: under ``umask 000`` the cache was
    world-writable, so another local user could swap the ONNX file every search loads. Fabric's
    own default folders (``<cache>/fabric`` and its ``models``), made before they were made
    ``0o700`` (``0o755``, or ``0o777`` under ``umask 000``), lose their group and other bits when
    this user owns them (left as they are where that fails: not an error). Any other folder that
    exists already is left as it is (it may be shared on purpose: ``FABRIC_MODEL_CACHE``, or the
    user's own ``~/.cache``).

    Raises
    ------
    QueryModelError
        As :func:`model_cache_dir`, or if a folder cannot be made.
    """
    path = model_cache_dir()
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)  # the umask can only take bits away from 0o700
        except FileExistsError:
            pass  # another process made it meanwhile, with the same mode
        except OSError as exc:
            raise QueryModelError(f"cannot make the model cache {folder} ({exc}); set FABRIC_MODEL_CACHE") from exc
    if not os.environ.get("FABRIC_MODEL_CACHE"):
        for folder in (path.parent, path):
            _owner_only(folder)
    return path


def _owner_only(folder: Path) -> None:
    """Take the group and other bits off ``folder`` when it is a folder (not a link to one: that
    is the user's choice of place) that this user owns; nothing where that cannot be done."""
    try:
        st = os.lstat(folder)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(folder, stat.S_IMODE(st.st_mode) & 0o700)
    except OSError:
        pass  # a read-only file system, a folder gone meanwhile: the cache still works as it is


def exported_path(identity: str) -> Path:
    """Where the export of the model ``identity`` lives: keyed by it and the exporter's versions."""
    versions = "|".join(f"{p}={importlib.metadata.version(p)}" for p in ("torch", "onnx", "sentence-transformers"))
    key = hashlib.sha256(f"{identity}|{versions}|opset{OPSET}".encode()).hexdigest()[:16]
    return model_cache_dir() / f"all-MiniLM-L6-v2-query-{key}.onnx"


def ensure_exported(identity: str, max_seq_length: int) -> Path:
    """The verified ONNX file for ``identity``, exporting it (in a subprocess) when missing.

    Raises
    ------
    QueryModelError
        If the export or its verification fails; the message carries the subprocess's error.
    """
    ensure_model_cache_dir()  # before the cached file is used: an older Fabric's folders are tightened
    path = exported_path(identity)
    if path.exists():
        return path
    try:
        with exclusive_lock(path.with_suffix(".lock")):
            if path.exists():  # another process exported it while this one waited
                return path
            proc = subprocess.run(
                [sys.executable, "-m", "fabric_resources.models.minilm_export", "--out", str(path),
                 "--identity", identity, "--max-seq-length", str(max_seq_length)],
                capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                timeout=EXPORT_TIMEOUT_S,
            )
    except OSError as exc:
        raise QueryModelError(f"cannot write the model cache {path.parent} ({exc}); set FABRIC_MODEL_CACHE") from exc
    except subprocess.TimeoutExpired as exc:
        raise QueryModelError(f"exporting the MiniLM query model took over {EXPORT_TIMEOUT_S} s") from exc
    if proc.returncode != 0 or not path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise QueryModelError(f"exporting the MiniLM query model to {path} failed: " + " | ".join(tail))
    return path


class OnnxQueryEncoder:
    """Query vectors ``(n, 384) float32``, L2-normalised, in input order, on ``threads`` CPU threads.

    Raises :class:`QueryModelError` if ``onnx_path`` cannot be loaded.
    """

    def __init__(self, model_dir: Path, onnx_path: Path, max_seq_length: int, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own pybind error types for a bad file
            raise QueryModelError(f"{onnx_path} is not a loadable ONNX model ({exc})") from exc
        self._lock = threading.Lock()

    def feeds(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Token IDs, attention mask and type IDs, ``(n, longest) int64``, zero-padded on the right."""
        encodings = self.tokenizer.encode_batch([t.strip() for t in texts])
        width = max(len(e.ids) for e in encodings)
        out = {name: np.zeros((len(texts), width), dtype=np.int64) for name in INPUTS}
        for i, e in enumerate(encodings):
            out["input_ids"][i, :len(e.ids)] = e.ids
            out["attention_mask"][i, :len(e.ids)] = e.attention_mask
            out["token_type_ids"][i, :len(e.ids)] = e.type_ids
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DENSE_DIM), dtype=np.float32)
        feeds = self.feeds(texts)
        with self._lock:  # one session run at a time keeps the thread budget per query
            (vectors,) = self.session.run(None, feeds)
        return np.ascontiguousarray(vectors, dtype=np.float32)
