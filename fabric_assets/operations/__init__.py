"""Admin operations of ``fabric serve``, run on the write side (Dagster runs on the home's instance).

:class:`~fabric_assets.operations.backend.PipelineAdmin` implements the read side's
:class:`fabric_query.server.admin.AdminBackend` protocol; ``fabric serve`` plugs it into the app.
"""

from fabric_assets.operations.backend import PipelineAdmin

__all__ = ["PipelineAdmin"]
