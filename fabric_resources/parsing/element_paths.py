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
        # Up to the nearest ancestor whose path is known, then down: no recursion, so a page nested
        # as deep as libxml2 reads (255) costs no stack frame per level on top of the walk's.
        chain = []
        while el not in self.paths:
            parent = el.getparent()
            if parent is None:
                self.paths[el] = self.tree.getpath(el)
                break
            chain.append((el, parent))
            el = parent
        for child, parent in reversed(chain):
            self.paths[child] = f"{self.paths[parent]}/{self._steps(parent)[child]}"
        return self.paths[child] if chain else self.paths[el]

    def _steps(self, parent: Any) -> dict[Any, str]:
        """Each element child of ``parent`` -> its step in a path (``p``, ``p[2]``, ``*[3]``)."""
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
        return steps
