"""The Dagster run tags that say which file a parse partition is (names only; no Dagster import).

A partition key is a parse ID, a hash; Dagster's UI searches partitions by key only. What it can
search by text is run tags: the Runs page's *Tag* filter lists every tag key and, for the key
picked, every value, each list narrowed as one types. So every run over parse partitions carries,
for each source whose version one of its partitions is, the tag::

    fabric/source:<source key>  =  <parse ID>

Typing part of a file name under Runs → Filter → Tag finds the key; its values are the partitions
(one per version parsed), which the partitions tab of any parse asset then finds by key. The write
side adds the tags (``fabric_assets.source_tags``) and removes them again when a purge or the
retention cleanup removes what they name; ``fabric status --source`` answers the same from the
catalog.

The UI splits a tag filter at its first ``=``, so a key must not hold one: ``=`` in a source key is
written ``%3D`` and ``%`` is written ``%25`` (:func:`source_tag_key`, undone exactly by
:func:`source_key_of_tag`).
"""

from __future__ import annotations

import re

#: Prefix of every source tag key.
SOURCE_TAG_PREFIX = "fabric/source:"

_ESCAPED = re.compile(r"%(25|3D)")


def source_tag_key(source_key: str) -> str:
    """The run tag key naming ``source_key``.

    >>> source_tag_key("fs:notes/a=b 100%.md")
    'fabric/source:fs:notes/a%3Db 100%25.md'
    """
    return SOURCE_TAG_PREFIX + source_key.replace("%", "%25").replace("=", "%3D")


def source_key_of_tag(tag_key: str) -> str | None:
    """The source key a tag key names, or ``None`` for a key that is not a source tag.

    >>> source_key_of_tag(source_tag_key("fs:notes/a=b 100%3D.md"))
    'fs:notes/a=b 100%3D.md'
    >>> source_key_of_tag("dagster/partition") is None
    True
    """
    if not tag_key.startswith(SOURCE_TAG_PREFIX):
        return None
    return _ESCAPED.sub(lambda m: "%" if m.group(1) == "25" else "=", tag_key[len(SOURCE_TAG_PREFIX):])
