"""LLM annotations of excerpts: grounded entities, relations with quotes, summaries.

Entry point: :func:`~fabric_resources.annotator.producer.annotate_parse` (windows table,
config, :class:`~fabric_resources.annotator.memo.AnnotationMemo`,
:class:`~fabric_resources.annotator.client.ChatClient`) → ``(ANNOTATIONS table, AnnotationStats)``.
Modules: ``excerpts`` and ``grounding`` (pure), ``prompts`` (stages and schemas), ``client``
(OpenAI-compatible chat endpoint), ``memo`` (SQLite), ``producer`` (chains and accounting).
"""

from fabric_resources.annotator.client import CallFailed, ChatClient, MalformedOutput
from fabric_resources.annotator.memo import AnnotationMemo
from fabric_resources.annotator.producer import (
    AnnotationCancelled,
    AnnotationStats,
    ChainFailure,
    annotate_parse,
    annotate_parse_async,
    memo_key,
    producer_identity,
)

__all__ = [
    "AnnotationCancelled",
    "AnnotationMemo",
    "AnnotationStats",
    "CallFailed",
    "ChainFailure",
    "ChatClient",
    "MalformedOutput",
    "annotate_parse",
    "annotate_parse_async",
    "memo_key",
    "producer_identity",
]
