"""The ColBERT late-interaction encoder: token matrices of documents and queries via PyLate.

No trained ColBERT checkpoint ships on PyPI, so the checkpoint is a folder named by the
configuration (``late_interaction.checkpoint``): a PyLate/sentence-transformers ColBERT folder
(``modules.json`` with a PyLate ``Dense`` projection) or a Stanford ``HF_ColBERT`` folder. A plain
sentence-transformers folder is refused: PyLate would add a *randomly initialised* projection on
every load, so stored document matrices and later query matrices would not share a space.

PyLate is imported and the model loaded lazily, once per process per
``(checkpoint, document_length, query_length)`` (:func:`shared_colbert_encoder`). Rows are
``COLBERT_DIM`` (128) float32, finite and L2-normalised; anything else raises
:class:`ColbertOutputError`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from functools import cached_property
from pathlib import Path

import numpy as np

from fabric_resources.identity import weights_fingerprint
from fabric_resources.schema import COLBERT_DIM

#: Weight files whose fingerprints make up a checkpoint's identity.
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")

#: Tolerance on ``| ||row|| - 1 |`` of an output row before it is re-normalised.
ROW_NORM_TOLERANCE = 1e-3


class ColbertCheckpointError(Exception):
    """The configured checkpoint folder is missing or is not a usable ColBERT checkpoint."""


class ColbertOutputError(Exception):
    """The model returned a matrix of the wrong width, a non-finite value or a zero row."""


def _weight_files(folder: Path) -> list[Path]:
    files = {p for pattern in _WEIGHT_PATTERNS for p in folder.glob(pattern)}
    files |= {p for pattern in _WEIGHT_PATTERNS for p in folder.glob(f"*/{pattern}")}
    return sorted(p for p in files if p.is_file())


def validate_checkpoint(folder: str | Path) -> Path:
    """Check, without loading anything, that ``folder`` is a ColBERT checkpoint; return it resolved.

    Raises
    ------
    ColbertCheckpointError
        If the folder does not exist, has no ``config.json`` or weight file, or names no trained
        projection (neither a PyLate ``Dense`` module in ``modules.json`` nor an ``HF_ColBERT``
        architecture in ``config.json``).
    """
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise ColbertCheckpointError(f"ColBERT checkpoint folder not found: {path}")
    path = path.resolve()
    if not (path / "config.json").is_file():
        raise ColbertCheckpointError(f"{path} has no config.json: not a model folder")
    if not _weight_files(path):
        raise ColbertCheckpointError(f"{path} holds no weight file ({', '.join(_WEIGHT_PATTERNS)})")
    try:
        modules = json.loads((path / "modules.json").read_text()) if (path / "modules.json").exists() else []
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ColbertCheckpointError(f"{path}: unreadable model config ({exc})") from exc
    has_dense = any(str(m.get("type", "")).endswith("Dense") for m in modules if isinstance(m, dict))
    stanford = "HF_ColBERT" in (config.get("architectures") or [])
    if not (has_dense or stanford):
        raise ColbertCheckpointError(
            f"{path} has no ColBERT projection (no PyLate Dense module, not HF_ColBERT): PyLate would "
            "initialise one at random on every load"
        )
    return path


def checkpoint_fingerprint(folder: Path) -> str:
    """12 hex of SHA-256 over ``relative path:weights_fingerprint`` of every weight file in
    ``folder`` and its sub-folders (the transformer *and* the projection), sorted by path."""
    h = hashlib.sha256()
    for f in _weight_files(folder):
        h.update(f"{f.relative_to(folder).as_posix()}:{weights_fingerprint(f)}\n".encode())
    return h.hexdigest()[:12]


def _checked_rows(matrix, what: str) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape[1] != COLBERT_DIM:
        raise ColbertOutputError(f"{what}: shape {m.shape}, expected (tokens, {COLBERT_DIM})")
    if m.shape[0] == 0:
        raise ColbertOutputError(f"{what}: no token rows")
    if not np.isfinite(m).all():
        raise ColbertOutputError(f"{what}: non-finite values")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ColbertOutputError(f"{what}: zero row")
    if np.abs(norms - 1.0).max() > ROW_NORM_TOLERANCE:
        m = m / norms
    return np.ascontiguousarray(m, dtype=np.float32)


class ColbertEncoder:
    """A ColBERT checkpoint on the CPU via PyLate (Khattab & Zaharia, SIGIR 2020).

    Parameters
    ----------
    checkpoint
        Folder of the checkpoint (see the module docstring).
    document_length
        Hard cap on a document's tokens, marker and special tokens included (PyLate
        ``document_length``; Fabric passes ``indexing.colbert_max_tokens``). Longer inputs are
        truncated by PyLate.
    query_length
        Query tokens; PyLate pads queries with ``[MASK]`` to this length (query augmentation).

    Raises
    ------
    ColbertCheckpointError
        At construction, if the folder is missing or invalid (:func:`validate_checkpoint`).
    """

    def __init__(self, checkpoint: str | Path, document_length: int, query_length: int, batch_size: int = 32) -> None:
        self.checkpoint = validate_checkpoint(checkpoint)
        self.document_length = int(document_length)
        self.query_length = int(query_length)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    @cached_property
    def identity(self) -> str:
        """``colbert:<folder name>#<weights fingerprint>:doc<document_length>`` — identifies the
        document matrices (the query length does not change them). Computed without PyLate."""
        return f"colbert:{self.checkpoint.name}#{checkpoint_fingerprint(self.checkpoint)}:doc{self.document_length}"

    @cached_property
    def model(self):
        """The PyLate ``ColBERT`` model (imports PyLate and loads the weights on first use)."""
        with self._lock:
            import transformers
            from pylate import models

            transformers.logging.set_verbosity_error()
            transformers.utils.logging.disable_progress_bar()
            try:
                return models.ColBERT(
                    model_name_or_path=str(self.checkpoint), device="cpu",
                    document_length=self.document_length, query_length=self.query_length,
                    local_files_only=True,
                )
            except (OSError, ValueError, KeyError) as exc:
                raise ColbertCheckpointError(f"{self.checkpoint}: PyLate could not load it ({exc})") from exc

    def document_token_counts(self, texts: list[str]) -> list[int]:
        """Tokens each text would take as a document before truncation: the tokenizer's ids with
        special tokens, plus PyLate's document marker when the checkpoint has one."""
        if not texts:
            return []
        marker = 1 if getattr(self.model, "document_prefix_id", None) is not None else 0
        ids = self.model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
        return [len(x) + marker for x in ids]

    def encode_documents(self, texts: list[str]) -> list[np.ndarray]:
        """Document matrices, in input order: one ``(tokens, 128) float32`` array per text, rows
        L2-normalised. ``tokens`` ≤ ``document_length``; PyLate drops punctuation (its skiplist)
        and padding rows, so it is usually below the input's token count.

        Raises
        ------
        ColbertOutputError
            If a matrix is not ``(t ≥ 1, 128)``, holds a non-finite value or a zero row.
        """
        if not texts:
            return []
        out = self.model.encode(
            list(texts), is_query=False, batch_size=self.batch_size, show_progress_bar=False,
            convert_to_numpy=True, normalize_embeddings=True,
        )
        if len(out) != len(texts):
            raise ColbertOutputError(f"{len(out)} matrices for {len(texts)} documents")
        return [_checked_rows(m, f"document {i}") for i, m in enumerate(out)]

    def encode_query(self, text: str) -> np.ndarray:
        """Query matrix ``(query_length, 128) float32`` (``[MASK]``-augmented), rows L2-normalised.

        Raises
        ------
        ColbertOutputError
            As :meth:`encode_documents`.
        """
        out = self.model.encode(
            [text], is_query=True, batch_size=1, show_progress_bar=False,
            convert_to_numpy=True, normalize_embeddings=True,
        )
        return _checked_rows(out[0], "query")


_SHARED: dict[tuple[str, int, int], ColbertEncoder] = {}
_SHARED_LOCK = threading.Lock()


def shared_colbert_encoder(checkpoint: str | Path, document_length: int, query_length: int) -> ColbertEncoder:
    """One encoder per ``(checkpoint folder, document_length, query_length)`` per process.

    Raises
    ------
    ColbertCheckpointError
        If the folder is missing or invalid.
    """
    key = (str(validate_checkpoint(checkpoint)), int(document_length), int(query_length))
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = ColbertEncoder(key[0], key[1], key[2])
        return _SHARED[key]
