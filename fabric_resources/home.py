"""A Fabric home: one directory holding the config, the data and the Dagster instance.

``FABRIC_HOME`` (default ``./.fabric``) selects it. ``DAGSTER_HOME`` is
``<home>/dagster`` so that ``fabric ingest`` and ``dagster dev`` see the same
runs and materializations.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from fabric_resources.artifact_store import ArtifactStore
from fabric_resources.catalog import Catalog
from fabric_resources.config import FabricConfig
from fabric_resources.lexical_index import LexicalIndex
from fabric_resources.schema import HomeLayout
from fabric_resources.home_location import DEFAULT_HOME, home_path  # noqa: F401 - re-exported
from fabric_resources.tables import TableStore

_DAGSTER_YAML = """\
# Written by Fabric. The instance lives under the Fabric home.
telemetry:
  enabled: false
nux:
  enabled: false
"""


class FabricHome:
    """Opens the stores of one home lazily. Creating it makes the directories."""

    def __init__(self, root: str | os.PathLike | None = None, *, read_only: bool = False) -> None:
        self.layout = HomeLayout(home_path(root))
        self.read_only = read_only
        if not read_only:
            self.layout.root.mkdir(parents=True, exist_ok=True)
            self.layout.dagster_home.mkdir(parents=True, exist_ok=True)
            yaml = self.layout.dagster_home / "dagster.yaml"
            if not yaml.exists():
                yaml.write_text(_DAGSTER_YAML)

    @property
    def root(self) -> Path:
        return self.layout.root

    @cached_property
    def config(self) -> FabricConfig:
        return FabricConfig.load(self.layout.config_file)

    @cached_property
    def catalog(self) -> Catalog:
        return Catalog(self.layout.catalog_file, read_only=self.read_only)

    @cached_property
    def artifacts(self) -> ArtifactStore:
        return ArtifactStore(self.layout.artifacts)

    @cached_property
    def tables(self) -> TableStore:
        return TableStore(self.layout.tables)

    @cached_property
    def lexical(self) -> LexicalIndex:
        return LexicalIndex(self.layout.indexes / "lexical")

    def exists(self) -> bool:
        return self.layout.catalog_file.exists()

