"""What a client that is not the operator may see of the home: nothing of withheld sources.

The operator (``fabric status`` in-process, or through the server with the admin token, which
:func:`fabric_query.remote.call` sends when it can read the home's ``admin-token``) sees withheld
sources by name, with their states. Every other client — an MCP tool call, an HTTP program holding
no token or the read token — learns nothing of them, not even that they exist: a file's name can
itself be the secret (``layoffs-2027.md``), and the read token is handed to other people when the
server binds an interface other than loopback.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from fabric_query.api import Fabric
from fabric_query.visibility import current_sources_config


def client_status(fabric: Fabric) -> dict[str, Any]:
    """``Fabric.status`` as JSON, as a client that is not the operator may see it (the MCP tool,
    ``/v1/status`` without the admin token): :func:`without_withheld` with the home's
    ``sources.withheld`` patterns as the config file holds them now (a pattern added while the
    server runs hides its sources at once, also from the current release's counts)."""
    is_withheld = current_sources_config(fabric.home).is_withheld
    status = fabric.status().model_dump(mode="json")
    catalog = fabric.home.catalog
    release = catalog.current_release()
    visible = {k: m for k, m in (release.manifest["sources"] if release else {}).items() if not is_withheld(k)}
    sources = catalog.sources()
    owners: dict[str, list[str]] = {}
    for s in sources:
        if s.parse_id and s.state != "deleted":
            owners.setdefault(s.parse_id, []).append(s.source_key)
    hidden_pending = sum(1 for r in catalog.parse_runs(status="pending")
                         if r.parse_id in owners and all(is_withheld(k) for k in owners[r.parse_id]))
    # A root is a folder the operator named: one whose every source is withheld (or the patterns
    # withhold its whole label, `payroll/*`) names withheld files by its path (trial 20h).
    under: dict[str, list[str]] = {}
    for s in sources:
        if s.state != "deleted":
            under.setdefault(s.source_key.split(":", 1)[-1].split("/", 1)[0], []).append(s.source_key)
    hidden_roots = frozenset(r.path for r in catalog.roots()
                             if is_withheld(f"fs:{r.label}/")
                             or (under.get(r.label) and all(is_withheld(k) for k in under[r.label])))
    return without_withheld(status, is_withheld, Counter(s.state for s in sources if is_withheld(s.source_key)),
                            visible, hidden_pending, hidden_roots)


def without_withheld(status: dict[str, Any], is_withheld: Callable[[str], bool], hidden_states: Mapping[str, int],
                     visible_active: Mapping[str, dict], hidden_pending: int = 0,
                     hidden_roots: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``status`` (:class:`fabric_query.types.Status` as JSON) with withheld sources neither named
    nor counted (the operator's own ``fabric status`` lists them; a client learns nothing of them,
    not even that they exist). ``is_withheld``: the home's ``sources.withheld`` patterns, which
    also hide the paths the last scan skipped (too large, unreadable; not sources, so in no
    count); ``hidden_states``: how many withheld sources are in each state; ``visible_active``:
    the current release's entries of the sources not withheld (a source withheld after the
    release was published is still in it until the next); ``hidden_pending``: pending parses
    only withheld sources wait for; ``hidden_roots``: the paths of roots whose sources are all
    withheld (left out of ``roots``)."""
    out = {**status, "withheld": [], "roots": [r for r in status.get("roots") or () if r not in hidden_roots]}
    by_state = dict(out.get("sources_by_state") or {})
    for state, n in hidden_states.items():
        if state in by_state:
            by_state[state] -= n
            if by_state[state] <= 0:
                del by_state[state]
    out["sources_by_state"] = by_state
    out["active_sources"] = len(visible_active)
    out["active_parses"] = len({m["parse_id"] for m in visible_active.values()})
    out["pending"] = max(0, int(out.get("pending") or 0) - hidden_pending)
    for key in ("failed", "held", "unfinished", "partial"):
        problems = []
        for p in out.get(key) or ():
            kept = [k for k in p.get("sources") or () if not is_withheld(k)]
            if kept or not p.get("sources"):
                problems.append({**p, "sources": kept})
        out[key] = problems
    outdated = []
    for o in out.get("outdated") or ():
        kept = [k for k in o.get("sources") or () if not is_withheld(k)]
        if kept:
            outdated.append({**o, "sources": kept})
    out["outdated"] = outdated
    out["unpublished"] = [k for k in out.get("unpublished") or () if not is_withheld(k)]
    out["unsupported"] = [u for u in out.get("unsupported") or () if not is_withheld(u[0])]
    out["skipped"] = [s for s in out.get("skipped") or () if not is_withheld(s[0])]
    return out
