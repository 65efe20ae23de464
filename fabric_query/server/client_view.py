"""What a client that is not the operator may see of the home: nothing of withheld sources.

The operator (``fabric status`` in-process, or through the server with the admin token, which
:func:`fabric_query.remote.call` sends when it can read the home's ``admin-token``) sees withheld
sources by name, with their states. Every other client — an MCP tool call, an HTTP program holding
no token or the read token — learns nothing of them, not even that they exist: a file's name can
itself be the secret (``layoffs-2027.md``), and the read token is handed to other people when the
server binds an interface other than loopback.

Nor does such a client learn where the home lies: the home's and the roots' absolute paths (a
user name, a folder's name) are the operator's. A client sees each root by its label (the name
its source keys begin with, ``fs:<label>/…``) and no ``home``; a path of the home, a root or a
local table folder quoted inside a reason's text reads ``<home>``, the root's label or
``<tables>``. The operator's diagnostics whose details count rows over every parse of the release,
withheld ones too (``rows_changed``, the dense check's ``its 301 rows of release 3's parses``), or
quote a library's error with file paths, reach a client cut to what is affected and why.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from fabric_query.api import Fabric
from fabric_query.visibility import current_sources_config


def client_status(fabric: Fabric) -> dict[str, Any]:
    """``Fabric.status`` as JSON, as a client that is not the operator may see it (the MCP tool,
    ``/v1/status`` without the admin token): :func:`without_withheld` with the home's
    ``sources.withheld`` patterns as the config file holds them now (a pattern added while the
    server runs hides its sources at once, also from the current release's counts), then
    :func:`without_paths`: no ``home`` key; ``roots`` by label (``["corpus"]``; ``"root-<id>"``
    for one without a label); ``rows_changed`` by table name only (``["chunk_vectors"]``: its
    counts take in withheld parses; only tables where a visible parse changed); ``unreadable_tables``
    without a data file holding hidden parses' rows only (:func:`_unreadable_seen`); ``dense_channels_off``, ``dense_index_fallback`` and
    ``dense_index_problems`` as ``"<channel or table>: <reason>"``; ``lexical_index_problem`` as
    its reason; any other text with the home's, roots' and local tables' paths replaced."""
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
    roots = catalog.roots()
    hidden_roots = frozenset(r.path for r in roots
                             if is_withheld(f"fs:{r.label}/")
                             or (under.get(r.label) and all(is_withheld(k) for k in under[r.label])))
    # Nor does what the scan says of such a root's folder name it: its `root-unavailable` entry
    # (`fs:payroll/`, its drive unmounted) or a file skipped under it (trial 21f).
    hidden_labels = {r.label for r in roots if r.path in hidden_roots}
    hidden = (lambda key: is_withheld(key) or key.split(":", 1)[-1].split("/", 1)[0] in hidden_labels)
    if status.get("rows_changed") and release is not None:
        status["rows_changed"] = _rows_changed_seen(fabric, status["rows_changed"], release.manifest["sources"],
                                                    visible)
    if status.get("unreadable_tables") and release is not None:
        status["unreadable_tables"] = _unreadable_seen(fabric, status["unreadable_tables"],
                                                       release.manifest["sources"], visible)
    seen = without_withheld(status, hidden, Counter(s.state for s in sources if is_withheld(s.source_key)),
                            visible, hidden_pending, hidden_roots)
    names = {r.path: r.label or f"root-{r.root_id}" for r in roots}
    return without_paths(seen, names, _places(fabric, names))


def _places(fabric: Fabric, names: Mapping[str, str]) -> dict[str, str]:
    """Each absolute path a client does not see → what it reads instead: the home, the roots
    (``names``: path → label), the local tables."""
    places = {str(fabric.home.root): "<home>", **names}
    if not fabric.home.tables.remote:
        places[str(fabric.home.tables.root)] = "<tables>"
    return places


def client_text(fabric: Fabric, text: str, roots: bool = True) -> str:
    """``text`` (an error's message, a channel's skip reason) as a client that is not the operator
    may read it: the home's, roots' and local tables' paths replaced as :func:`client_status`
    replaces them (``<home>``, the root's label, ``<tables>``), also as Lance quotes a path (without
    its leading ``/``). A search's error over HTTP or MCP quoted the home's path whole
    (``Not found: home/u/fab/tables/chunks.lance/data/….lance``; trial 22b). The roots are read from
    the catalog (not with ``roots`` False: the error is the catalog's, and asking it again could
    wait for a database that is down); where it cannot be read, the home and tables alone."""
    names = {}
    if roots:
        try:
            names = {r.path: r.label or f"root-{r.root_id}" for r in fabric.home.catalog.roots()}
        except Exception:  # noqa: BLE001 - a catalog gone or damaged: the paths known without it still go
            names = {}
    return _path_replacer(_places(fabric, names))(text)


def _rows_changed_seen(fabric: Fabric, rows_changed: list[str], active: Mapping[str, dict],
                       visible: Mapping[str, dict]) -> list[str]:
    """The operator's ``rows_changed`` entries (``"<table>: …"``) for the tables where a parse of a
    visible source changed: a table where only withheld parses did (a source withheld after the
    release was published is still active in it) would tell a client that something about withheld
    documents changed (trial 22b). The row audit is asked again as the status asked it, so it
    answers from its cache, per parse."""
    from fabric_resources.row_audit import release_rows_changed

    shown = {m["parse_id"] for m in visible.values()}
    if {m["parse_id"] for m in active.values()} <= shown:
        return rows_changed  # no active parse is hidden: every entry is about visible documents
    changed = release_rows_changed(fabric.home, {m["parse_id"] for m in active.values()},
                                   fabric.home.catalog.parse_run_overview())
    tables = {c.table for c in changed if any(pid in shown for pid, _, _ in c.parses)}
    return [r for r in rows_changed if _cut(r, 1) in tables]


def _unreadable_seen(fabric: Fabric, unreadable: list[str], active: Mapping[str, dict],
                     visible: Mapping[str, dict]) -> list[str]:
    """The operator's ``unreadable_tables`` entries (``"<table> version <v>: <problem>"``) but those
    of a data file holding rows of hidden parses only (a document withheld since the release,
    written by its own ingest): a search reads around such a file
    (:mod:`fabric_resources.fragment_damage`), and naming it would tell a client that something
    about a document it may not see is damaged, where a home that never had it says nothing."""
    from fabric_resources.fragment_damage import damage_unseen

    shown = {m["parse_id"] for m in visible.values()}
    if {m["parse_id"] for m in active.values()} <= shown:
        return unreadable  # no active parse is hidden: the damage is the visible documents'
    out = []
    for entry in unreadable:
        table, _, rest = entry.partition(" version ")
        version, _, problem = rest.partition(": ")
        if (problem.startswith("data file ") and version.isdigit()
                and damage_unseen(fabric.home, table, int(version), shown)):
            continue
        out.append(entry)
    return out


def without_paths(status: dict[str, Any], names: Mapping[str, str], places: Mapping[str, str]) -> dict[str, Any]:
    """``status`` (:class:`fabric_query.types.Status` as JSON) as :func:`client_status` documents:
    ``names`` maps each root's path to its label; ``places`` each absolute path to what a text
    says in its place (the home, roots, local tables; also as they resolve through links)."""
    out = {k: v for k, v in status.items() if k != "home"}
    out["roots"] = [names.get(p, f"root-{i}") for i, p in enumerate(out.get("roots") or (), 1)]
    out["rows_changed"] = [_cut(r, 1) for r in out.get("rows_changed") or ()]
    for key in ("dense_channels_off", "dense_index_fallback", "dense_index_problems"):
        out[key] = [_cut(r, 2) for r in out.get(key) or ()]
    if out.get("lexical_index_problem"):
        out["lexical_index_problem"] = _cut(out["lexical_index_problem"], 1)
    return _replaced(out, _path_replacer(places))


def _path_replacer(places: Mapping[str, str]) -> Callable[[str], str]:
    """text → text with each path of ``places`` (also as it resolves through links) replaced by
    what ``places`` says in its place."""
    pairs = {**places, **{os.path.realpath(p): said for p, said in places.items()}}
    pairs = {p.rstrip("/"): said for p, said in pairs.items() if p.rstrip("/")}  # "/" itself: nothing to hide
    if not pairs:
        return lambda text: text
    # Longest first: a root inside the home is named by its label, not as "<home>/…". A path only
    # where a text quotes one (after a space, a quote, ':', '=' or a URI's "file://"; ending at a
    # separator or a sentence's end): a source key's own folders ("fs:corpus/data/x") are never
    # taken for the root "/data". Lance quotes a local path without its leading "/" ("Dataset at
    # path home/u/fab/tables/chunks.lance was not found"): that form too, only after a space or a
    # quote, and only of two folders or more (a source key's label is one).
    bare = {p.lstrip("/"): said for p, said in pairs.items() if "/" in p.lstrip("/")}
    end = r"(?=$|[/\s'\"),\]>:;!?]|\.(?!\w))"
    pattern = re.compile(r"(?:(?<=^)|(?<=[\s'\"(\[<:=,])|(?<=file://))(" + _longest_first(pairs) + ")" + end
                         + ((r"|(?:(?<=^)|(?<=[\s'\"(\[]))(" + _longest_first(bare) + ")" + end) if bare else ""))
    return lambda text: pattern.sub(lambda m: pairs[m.group(1)] if m.group(1) is not None else bare[m.group(2)], text)


def _longest_first(paths: Mapping[str, str]) -> str:
    return "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))


def _cut(text: str, parts: int) -> str:
    """The first ``parts`` ``": "``-separated parts of ``text`` (``"dense: vector-digest-mismatch"``)."""
    return ": ".join(text.split(": ")[:parts])


def _replaced(value: Any, replace: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, dict):
        return {k: _replaced(v, replace) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replaced(v, replace) for v in value]
    return value


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
    # "<channel>: <source key>": the check reads visible parses only; kept to the patterns as they are now.
    for field in ("dense_sources_left_out", "dense_index_sources_left_out"):
        out[field] = [e for e in out.get(field) or () if not is_withheld(e.split(": ", 1)[-1])]
    return out


def client_search(fabric: Fabric, *args: Any, **kwargs: Any) -> Any:
    """``fabric.search(*args, **kwargs)`` as a client receives it (:func:`client_pack`); run in the
    admission gate, as the search is, so the catalog read of the roots is not the event loop's."""
    return client_pack(fabric, fabric.search(*args, **kwargs))


#: Reasons whose detail counts or names rows of every parse of the release (a source withheld
#: since it was published too): ``vector-digest-mismatch: chunk_vectors: its 302 rows of release
#: 3's parses …``, ``table-mismatch``, ``dense-index-release-mismatch: …: 300 rows, the release
#: recorded 302``. A client reads them as ``<reason>: <table>``, as its
#: status reads the same checks without their counts (trial 21a).
ROW_COUNTING_REASONS = frozenset({"vector-digest-mismatch", "table-mismatch", "dense-index-release-mismatch"})


def _reason_seen(fabric: Fabric, reason: str) -> str:
    """A skip or fallback reason as a client reads it: :data:`ROW_COUNTING_REASONS` cut to their
    reason and table, any other through :func:`client_text`."""
    if _cut(reason, 1) in ROW_COUNTING_REASONS:
        return client_text(fabric, _cut(reason, 2))
    return client_text(fabric, reason)


def client_pack(fabric: Fabric, pack: Any) -> Any:
    """An EvidencePack as a client that is not the operator receives it: its channels' skip and
    fallback reasons through :func:`client_text` (a storage error quoted there names files under
    the home), those counting the release's rows cut (:data:`ROW_COUNTING_REASONS`: a search
    over HTTP or MCP carried ``its 302 rows of release 3's parses``, withheld rows counted, which
    the client's status cut; trial 23c); documents' text and citations untouched."""
    if not pack.skipped_channels and not pack.dense_fallback_reason and not pack.fallback_reason:
        return pack
    return pack.model_copy(update={
        "skipped_channels": {k: _reason_seen(fabric, v) for k, v in pack.skipped_channels.items()},
        "dense_fallback_reason": pack.dense_fallback_reason and _reason_seen(fabric, pack.dense_fallback_reason),
        "fallback_reason": pack.fallback_reason and client_text(fabric, pack.fallback_reason)})
