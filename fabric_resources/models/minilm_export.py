"""Export all-MiniLM-L6-v2 to ONNX and verify it against sentence-transformers (run as a subprocess).

``python -m fabric_resources.models.minilm_export --out F --identity I --max-seq-length N`` is what
:func:`~fabric_resources.models.minilm_onnx.ensure_exported` runs: it traces the passage model's
transformer, mean pooling and normalisation modules with ``torch.onnx.export``, checks that the
``tokenizers`` feeds equal sentence-transformers' token IDs and that the vectors of
:data:`~fabric_resources.models.minilm_onnx.PROBES` agree within ``MAX_ABS_DIFF``, then publishes
``F`` atomically. Its own module so that the query side (``minilm_onnx``) never imports torch or the
passage encoder, and the passage encoder and the query runtime do not import each other.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from fabric_resources.models.embedder import MiniLMEmbedder, minilm_model_path
from fabric_resources.models.minilm_onnx import INPUTS, MAX_ABS_DIFF, OPSET, PROBES, OnnxQueryEncoder, QueryModelError


def _export(out: Path, identity: str, max_seq_length: int) -> None:
    """Export, verify against sentence-transformers, then publish ``out`` atomically."""
    import torch

    embedder = MiniLMEmbedder(max_seq_length=max_seq_length)
    if embedder.identity != identity:
        raise QueryModelError(f"installed model is {embedder.identity}, asked for {identity}")
    model = embedder.model

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            features = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            return self.model(features)["sentence_embedding"]

    sample = model.tokenize(["a probe", "a longer probe sentence"])
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    dynamic = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
    with torch.no_grad():
        torch.onnx.export(
            Pooled().eval(), tuple(sample[name] for name in INPUTS), str(tmp), input_names=list(INPUTS),
            output_names=["embedding"], dynamic_axes={**dynamic, "embedding": {0: "batch"}}, opset_version=OPSET,
            dynamo=False,
        )
    try:
        onnx = OnnxQueryEncoder(minilm_model_path(), tmp, max_seq_length, threads=1)
        texts = list(PROBES)
        reference = model.tokenize(texts)
        ours = onnx.feeds(texts)
        for name in INPUTS:
            if not np.array_equal(reference[name].numpy(), ours[name]):
                raise QueryModelError(f"tokenizers and sentence-transformers disagree on {name}")
        diff = float(np.abs(onnx.encode(texts) - embedder.encode_passages(texts)).max())
        if not diff <= MAX_ABS_DIFF:
            raise QueryModelError(f"ONNX vectors differ from sentence-transformers by {diff:.2e}")
        # torch writes it with the umask's mode (0o666 under umask 000): only its owner may change it.
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Export and verify the MiniLM ONNX query model.")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--max-seq-length", required=True, type=int)
    args = parser.parse_args(argv)
    _export(args.out, args.identity, args.max_seq_length)


if __name__ == "__main__":
    main()
