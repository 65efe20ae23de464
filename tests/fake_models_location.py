"""A code location for tests that launch runs the way the daemon does (backfills): the definitions
of the home in ``$FABRIC_HOME`` as ``workspace.yaml``'s target builds them
(``fabric_assets.definitions.defs``), with the fake encoders bound instead of the configured
models, so a run embeds in milliseconds. Loaded by file path (``LoadableTargetOrigin``)."""

import dagster as dg

from fabric_assets.definitions import build_definitions
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import FAKE_MODELS
from fabric_resources.home import home_path


@dg.definitions
def defs() -> dg.Definitions:
    home = home_path()
    return build_definitions(FabricConfig.load(home / "config.json"), FAKE_MODELS, str(home))
