"""The annotation model backend and its memo: what the ``annotations`` asset calls and stores.

``client`` (an OpenAI-compatible chat endpoint, the annotator model role) and ``memo`` (SQLite:
content × producer identity → grounded output) are models and storage, so they live here. What
to ask and how to ground the answers — excerpts, prompts, grounding, the producer — is write-side
domain logic beside its asset, in :mod:`fabric_assets.annotations`.
"""

from fabric_resources.annotator.client import CallFailed, ChatClient, MalformedOutput
from fabric_resources.annotator.memo import AnnotationMemo

__all__ = ["AnnotationMemo", "CallFailed", "ChatClient", "MalformedOutput"]
