"""Fabric's thin read side: query language, channels, fusion, evidence, resolve.

Importable and usable without Dagster in the process.
"""

from fabric_query.api import Fabric, Status
from fabric_query.scope import Scope
from fabric_query.types import Citation, EvidencePack, Hit, ResolveResult

__all__ = ["Citation", "EvidencePack", "Fabric", "Hit", "ResolveResult", "Scope", "Status"]
