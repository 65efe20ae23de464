"""Today's visibility: which sources a query or a resolve may show, whatever release it pins.

A source is *visible* when the catalog knows it in a state that keeps it searchable
(``present``, or ``access_lost`` while its folder is unreachable) and the current
``sources.withheld`` patterns do not match it. A deleted source, a source the catalog does not
know and a withheld one are all invisible, through every release: pinning a past release (an
in-flight query, an audit) shows that release's versions of the sources visible *now*, never a
source that has been deleted or withheld since.

The withheld patterns are read from the home's ``config.json`` again whenever the file changes
(its inode, size or mtime), so withholding applies to the next query, before any ingest. Other
settings are read once, when the home is opened.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from fabric_resources.config import FabricConfig, SourcesConfig
from fabric_resources.home import FabricHome
from fabric_resources.schema import SOURCE_STATES

#: Source states whose sources are searchable (``access_lost``: the root is unreachable for now).
VISIBLE_STATES = ("present", "access_lost")
#: Every other state hides its sources.
HIDDEN_STATES = tuple(s for s in SOURCE_STATES if s not in VISIBLE_STATES)


@dataclass(frozen=True)
class Visibility:
    """One reading of today's visibility.

    ``sources``: the config's ``sources`` section now (its ``withheld`` patterns);
    ``hidden_keys``: source keys the catalog holds in a state of ``HIDDEN_STATES``.
    """

    sources: SourcesConfig
    hidden_keys: frozenset[str]

    @property
    def withheld(self) -> tuple[str, ...]:
        return self.sources.withheld

    def is_withheld(self, source_key: str) -> bool:
        return self.sources.is_withheld(source_key)


_PATTERNS: dict[str, tuple[tuple[int, int, int], SourcesConfig]] = {}
_PATTERNS_LOCK = threading.Lock()


def current_sources_config(home: FabricHome) -> SourcesConfig:
    """The ``sources`` section of the home's config file as it is now (re-read when it changed).

    Raises
    ------
    fabric_resources.config.ConfigError
        The file changed and is no longer a valid configuration (visibility cannot be known, so
        nothing is answered).
    """
    path = home.layout.config_file
    try:
        st = os.stat(path)
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        signature = (0, -1, 0)
    except OSError:
        signature = None  # a link loop, no permission: FabricConfig.load names it (ConfigError)
    key = str(path)
    with _PATTERNS_LOCK:
        cached = _PATTERNS.get(key)
    if cached is not None and signature is not None and cached[0] == signature:
        return cached[1]
    sources = FabricConfig.load(path).sources
    with _PATTERNS_LOCK:
        _PATTERNS[key] = (signature, sources)
    return sources


def current_visibility(home: FabricHome) -> tuple[int | None, Visibility]:
    """The current release pointer and today's visibility: one catalog read transaction and a
    ``stat`` of the config file."""
    pointer, hidden = home.catalog.pointer_and_source_keys_in(HIDDEN_STATES)
    return pointer, Visibility(current_sources_config(home), frozenset(hidden))


def source_is_visible(home: FabricHome, source_key: str) -> bool:
    """True when ``source_key`` is visible now (see the module docstring)."""
    row = home.catalog.source(source_key)
    return row is not None and row.state in VISIBLE_STATES and not current_sources_config(home).is_withheld(source_key)
