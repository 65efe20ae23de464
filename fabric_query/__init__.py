"""Fabric's thin read side: query language, channels, fusion, evidence, resolve.

Importable and usable without Dagster in the process. The names below load on first use
(PEP 562), so a module that needs only part of the read side (``fabric_query.types``, or the CLI
talking to a running server) does not pay for the whole query stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Fabric": "fabric_query.api", "Status": "fabric_query.types", "Scope": "fabric_query.scope",
    "Citation": "fabric_query.types", "EvidencePack": "fabric_query.types", "Hit": "fabric_query.types",
    "ResolveResult": "fabric_query.types",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fabric_query.api import Fabric
    from fabric_query.scope import Scope
    from fabric_query.types import Citation, EvidencePack, Hit, ResolveResult, Status


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fabric_query' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
