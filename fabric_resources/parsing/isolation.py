"""Run a parser in a child process under a wall-clock and memory bound.

PDFium and libxml2 are C code: a hang or a crash inside them cannot be
stopped or caught from Python in the same process, and a decompression bomb
exhausts the whole run's memory before any Python check sees it. So the
PDF, DOCX, PPTX and HTML plug-ins run their pure parse function in a child
(``python -m fabric_resources.parsing.isolation``) with ``RLIMIT_AS`` set and
a timeout; the bytes go in on stdin, the :class:`ParsedDocument` comes back
as JSON on stdout. The parse itself is the same function either way, so the
units are identical with or without isolation (a test checks it).

Cost: one interpreter start plus the parser's imports per document, measured
in ``docs/benchmarks.md`` ("Formats"); ``mode="in-process"`` skips it when
the input is trusted.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

from types import SimpleNamespace
from typing import TYPE_CHECKING

from fabric_resources.parsing.document import (ParsedDocument, ParsedRelationship, ParsedUnit, ParseError, UnreadPart,
                                               machine_fault)

if TYPE_CHECKING:  # not imported in the child: pydantic alone costs it ~0.1-0.3 s per document
    from pydantic import BaseModel

    from fabric_resources.config import IsolationConfig

#: Lines of the child's stderr kept in a failure's detail.
_STDERR_TAIL = 600


def isolation_for(size: int, config: Any) -> "IsolationConfig":
    """The bounds a parse of ``size`` bytes runs under: the section's ``isolation``, made a child
    process when it is in-process and ``size`` exceeds the section's ``subprocess_above_bytes`` (a
    large input's cost, out of reach of an in-process timeout or memory bound)."""
    isolation = config.isolation
    if isolation.mode == "in-process" and size > config.subprocess_above_bytes:
        return isolation.model_copy(update={"mode": "subprocess"})
    return isolation


def run_parser(target: str, data: bytes, config: "BaseModel", media_type: str, isolation: "IsolationConfig") -> ParsedDocument:
    """Run ``target(data, config, media_type)`` in-process or in a bounded child.

    Parameters
    ----------
    target : str
        ``"package.module:function"``; the function is pure, ``(bytes, config, str) ->
        ParsedDocument``, and raises :class:`ParseError` on bad input.
    data : bytes
        The whole source file.
    config : pydantic.BaseModel
        The parser's config section, already validated. The child sees it as read-only attributes
        over its JSON (:func:`config_view`), so it imports no pydantic.
    media_type : str
    isolation : IsolationConfig
        ``mode``, ``timeout_s`` (wall clock, seconds) and ``max_memory_bytes`` (child address space).

    Returns
    -------
    ParsedDocument

    Raises
    ------
    ParseError
        The target's own reasons, and in a child: ``timeout`` (killed after ``timeout_s``),
        ``cap-memory`` (``MemoryError`` or ``ENOMEM`` under the address-space limit), ``parser-crashed``
        (killed by a signal, e.g. a segfault in C code), ``parser-error`` (any other exception:
        its type and message are the detail).
    OSError
        A fault of the machine's resources in the child (disk full, ``ulimit -f``, no descriptors:
        :func:`~fabric_resources.parsing.document.machine_fault`), raised again with its errno: the
        run fails and the parse stays pending, as in-process.
    """
    if isolation.mode == "in-process":
        return _load(target)(data, config, media_type)
    header = {
        "target": target,
        "config": config.model_dump(mode="json"),
        "media_type": media_type,
        "max_memory_bytes": isolation.max_memory_bytes,
    }
    payload = json.dumps(header).encode("utf-8") + b"\n" + data
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", __name__],
            input=payload, capture_output=True, timeout=isolation.timeout_s, env=env, check=False,
        )
    except subprocess.TimeoutExpired:
        raise ParseError("timeout", f"parse took longer than {isolation.timeout_s:g} s") from None
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else proc.returncode
        raise ParseError("parser-crashed", f"child killed by {name}; {_tail(proc.stderr)}")
    try:
        reply = json.loads(proc.stdout)
    except ValueError:
        raise ParseError("parser-crashed", f"exit {proc.returncode}, no result; {_tail(proc.stderr)}") from None
    if "machine_fault" in reply:  # the machine's, not the document's (bad_input_net lets it through)
        fault = reply["machine_fault"]
        raise OSError(fault["errno"], f"{fault['strerror']} (in the parser's child process)")
    if "error" in reply:
        raise ParseError(reply["error"]["reason"], reply["error"]["detail"])
    return document_from_json(reply["document"])


def _tail(stderr: bytes) -> str:
    return stderr.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def document_to_json(doc: ParsedDocument) -> dict[str, Any]:
    """A JSON-ready dict of ``doc`` (floats round-trip exactly through ``json``)."""
    return dataclasses.asdict(doc)


def document_from_json(data: dict[str, Any]) -> ParsedDocument:
    """The inverse of :func:`document_to_json`."""
    units = [ParsedUnit(u["kind"], u["text"], u["locator"], tuple(u["section_path"]), u["attributes"])
             for u in data["units"]]
    rels = [ParsedRelationship(r["kind"], r["source_index"], r["target_index"], r["attributes"])
            for r in data["relationships"]]
    unread = [UnreadPart(p["where"], p["reason"]) for p in data["unread"]]
    rest = {k: v for k, v in data.items() if k not in ("units", "relationships", "unread")}
    return ParsedDocument(units=units, relationships=rels, unread=unread, **rest)


def config_view(data: Any) -> Any:
    """Attribute access over a config section's JSON (nested sections too), as the parser reads it."""
    if isinstance(data, dict):
        return SimpleNamespace(**{k: config_view(v) for k, v in data.items()})
    return data


def _failure_reply(exc: Exception, limit: int) -> dict[str, Any]:
    """The child's reply for an exception its parse raised: out of address space under the limit
    (``ENOMEM``) is the document's ``cap-memory``; another fault of the machine's resources (disk
    full, ``ulimit -f``, no descriptors: :func:`~fabric_resources.parsing.document.machine_fault`)
    is the machine's, raised again in the parent; anything else is ``parser-error``."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return {"error": {"reason": "cap-memory", "detail": f"out of memory under a {limit}-byte address-space limit"}}
    if isinstance(exc, OSError) and machine_fault(exc):
        return {"machine_fault": {"errno": exc.errno, "strerror": exc.strerror or str(exc)}}
    return {"error": {"reason": "parser-error", "detail": f"{type(exc).__name__}: {exc}"[:_STDERR_TAIL]}}


def _child() -> int:
    import resource

    raw = sys.stdin.buffer.read()
    line, _, data = raw.partition(b"\n")
    header = json.loads(line)
    limit = int(header["max_memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        config = config_view(header["config"])
        doc = _load(header["target"])(data, config, header["media_type"])
        reply: dict[str, Any] = {"document": document_to_json(doc)}
    except ParseError as exc:
        reply = {"error": {"reason": exc.reason, "detail": exc.detail}}
    except MemoryError:
        reply = {"error": {"reason": "cap-memory", "detail": f"out of memory under a {limit}-byte address-space limit"}}
    except RecursionError as exc:
        reply = {"error": {"reason": "cap-depth", "detail": f"RecursionError: {exc}"}}
    except Exception as exc:  # bad input that a library reports with its own exception type
        reply = _failure_reply(exc, limit)
    out = json.dumps(reply, ensure_ascii=False).encode("utf-8")
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())
