"""libxml2's element paths (``tree.getpath(el)``) with each parent's children counted once.

libxml2 (``xmlGetNodePath``) counts an element's same-name siblings on every call, so a path for
each of n sibling paragraphs costs n² (100,000 paragraphs of one HTML body: 30 s). :class:`ElementPaths`
gives the same strings, counting each parent's element children once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["ElementPaths"]


def _step_name(el: Any) -> str:
    """An element's name in a path: ``prefix:name``, the local name outside any namespace, or
    ``*`` in a default namespace (XPath cannot name it; libxml2 then counts every element sibling)."""
    tag = el.tag
    if not tag.startswith("{"):  # no namespace (an HTML tag may hold a colon: "o:p")
        return tag
    local = tag.rpartition("}")[2]
    return f"{el.prefix}:{local}" if el.prefix else "*"


class ElementPaths:
    """``tree.getpath(el)`` for the elements of ``tree``, each parent's children counted once."""

    def __init__(self, tree: Any) -> None:
        self.tree = tree
        self.steps: dict[Any, dict[Any, str]] = {}
        self.paths: dict[Any, str] = {}

    def __call__(self, el: Any) -> str:
        if el in self.paths:
            return self.paths[el]
        parent = el.getparent()
        if parent is None:
            return self.paths.setdefault(el, self.tree.getpath(el))
        steps = self.steps.get(parent)
        if steps is None:
            children = [c for c in parent if isinstance(c.tag, str)]
            names = [_step_name(c) for c in children]
            total, seen = Counter(names), Counter()
            steps = self.steps[parent] = {}
            for position, (child, name) in enumerate(zip(children, names), start=1):
                seen[name] += 1
                if name == "*":  # counted among every element sibling
                    steps[child] = "*" if len(children) == 1 else f"*[{position}]"
                else:
                    steps[child] = name if total[name] == 1 else f"{name}[{seen[name]}]"
        return self.paths.setdefault(el, f"{self(parent)}/{steps[el]}")
