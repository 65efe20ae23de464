"""A stub OpenAI-compatible chat server for benchmarking the annotator on loopback.

:class:`StubChatServer` is a real :class:`http.server.ThreadingHTTPServer` on 127.0.0.1 (one
thread per connection, ``TCP_NODELAY``, HTTP/1.1 keep-alive) that answers
``POST /v1/chat/completions`` after a fixed per-call delay (``time.sleep``: the server's time,
standing in for a model). It tells the annotation stage by the JSON-schema name in
``response_format`` and reads the excerpt and the chain's prior outputs from the user message
(:func:`~fabric_assets.annotations.prompts.render_input`). Every answer is valid for its
stage schema and grounded by construction (copied from the excerpt), so the producer drops
nothing and makes no retries:

* entities: the distinct capitalised words of the excerpt, else its longest distinct words
  (at most :data:`MAX_ENTITIES`, in reading order), type ``CONCEPT``;
* statements: the first :data:`MAX_STATEMENTS` sentences of four or more words, verbatim;
* relations: one per statement: its first word, ``"relates to"``, its last word;
* quotes: each relation's statement text, copied;
* summary: the excerpt's first sentence (at most 200 characters).

``usage`` is an estimate (characters / 4, rounded up, of the prompt messages and of the reply
content); no tokenizer is involved. Each request is logged as ``(stage, received_s,
replied_s)`` in ``time.perf_counter`` seconds (CLOCK_MONOTONIC on Linux, so comparable across
processes). :class:`StubChatServerProcess` runs the server in a child process (``spawn``) so
that a benchmark's CPU and GIL measure the client alone.

Nothing here is used in production; it exists for ``fabric bench annotate``.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fabric_assets.annotations.prompts import ENTITIES, QUOTES, RELATIONS, STATEMENTS, SUMMARY

__all__ = ["CallTiming", "StubChatServer", "StubChatServerProcess", "stub_answer"]

#: Entities per reply.
MAX_ENTITIES = 3
#: Statements (and so relations and quotes) per reply.
MAX_STATEMENTS = 2
#: Characters of the summary at most.
SUMMARY_CHARS = 200

_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
_WORD = re.compile(r"[A-Za-z]{3,}")
# A sentence: a run without terminal punctuation or a blank line, ended by [.!?] or a blank line.
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|(?=\n\n)|$)")


@dataclass(frozen=True)
class CallTiming:
    """One request as the server saw it: stage (the schema name, ``"?"`` when absent), when its
    body was read and when its reply was written (``time.perf_counter`` seconds)."""

    stage: str
    received_s: float
    replied_s: float


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if len(s.split()) >= 4]


def _entities(text: str) -> list[str]:
    capitalised = list(dict.fromkeys(_CAPITALISED.findall(text)))
    if capitalised:
        return capitalised[:MAX_ENTITIES]
    words = list(dict.fromkeys(w for w in _WORD.findall(text)))
    longest = set(sorted(words, key=lambda w: (-len(w), w))[:MAX_ENTITIES])
    return [w for w in words if w in longest]


def stub_answer(stage: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The grounded answer to one request of ``stage`` (a stage's schema name) whose user message
    is ``payload``; see the module docstring.

    Raises
    ------
    KeyError
        If ``stage`` is not an annotation stage.
    """
    excerpt = str(payload.get("excerpt", ""))
    if stage == ENTITIES.name:
        return {"entities": [{"name": n, "entity_type": "CONCEPT"} for n in _entities(excerpt)]}
    if stage == STATEMENTS.name:
        return {"statements": _sentences(excerpt)[:MAX_STATEMENTS]}
    if stage == RELATIONS.name:
        relations = []
        for s in payload.get("statements", []):
            words = re.findall(r"\w+", s["text"])
            relations.append({"statement_index": s["index"], "subject": words[0], "predicate": "relates to",
                              "object": words[-1]})
        return {"relations": relations}
    if stage == QUOTES.name:
        statements = {s["index"]: s["text"] for s in payload.get("statements", [])}
        return {"supports": [{"relation_index": r["index"], "quotes": [statements[r["statement_index"]]]}
                             for r in payload.get("relations", [])]}
    if stage == SUMMARY.name:
        first = next(iter(_sentences(excerpt)), excerpt.strip())
        return {"summary": first[:SUMMARY_CHARS] or "(empty)"}
    raise KeyError(stage)


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


class StubChatServer:
    """``with StubChatServer(delay_s=0.05) as srv:`` then ``srv.base_url``
    (``http://127.0.0.1:PORT/v1``), ``srv.timings()`` and ``srv.max_in_flight()``.

    Parameters
    ----------
    delay_s : float
        Sleep per call before replying (>= 0), seconds.

    Replies: 200 with one choice (``finish_reason="stop"``) and ``usage``; 404 for another
    path; 400 for a body that is not a chat request of an annotation stage.
    """

    def __init__(self, *, delay_s: float = 0.0) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.delay_s = delay_s
        self._log: list[CallTiming] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the stdlib default adds ~40 ms per reply (Nagle + delayed ACK)

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received = time.perf_counter()
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                status, body, stage = outer._answer(raw)
                self._send(status, body)
                with outer._lock:
                    outer._log.append(CallTiming(stage, received, time.perf_counter()))

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body, ensure_ascii=False).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256  # a burst of concurrent connects must not overflow the backlog

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="stub-chat-server")

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def timings(self) -> list[CallTiming]:
        """Requests answered so far, in reply order."""
        with self._lock:
            return list(self._log)

    def max_in_flight(self) -> int:
        """Most requests the server was answering at once."""
        with self._lock:
            return self._max_in_flight

    def _answer(self, raw: bytes) -> tuple[int, dict[str, Any], str]:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            try:
                body = json.loads(raw)
                stage = body["response_format"]["json_schema"]["name"]
                payload = json.loads(body["messages"][-1]["content"])
                answer = stub_answer(stage, payload)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                return 400, {"error": {"message": f"not an annotation request: {exc!r}"[:200],
                                       "type": "invalid_request_error"}}, "?"
            if self.delay_s:
                time.sleep(self.delay_s)
            content = json.dumps(answer, ensure_ascii=False)
            prompt = _tokens(sum(len(str(m.get("content", ""))) for m in body.get("messages", [])))
            completion = _tokens(len(content))
            return 200, {
                "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "stub"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            }, stage
        finally:
            with self._lock:
                self._in_flight -= 1

    def __enter__(self) -> "StubChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _serve(conn: Any, delay_s: float) -> None:
    with StubChatServer(delay_s=delay_s) as srv:
        conn.send(srv.base_url)
        while True:
            message = conn.recv()
            if message == "timings":
                conn.send([(t.stage, t.received_s, t.replied_s) for t in srv.timings()])
            elif message == "max_in_flight":
                conn.send(srv.max_in_flight())
            elif message == "cpu_s":
                conn.send(time.process_time())
            else:
                break


class StubChatServerProcess:
    """:class:`StubChatServer` in a child process (``multiprocessing`` ``spawn``): the server's
    HTTP and JSON work neither holds this process's GIL nor counts in its ``process_time``.

    ``with StubChatServerProcess(delay_s=0.05) as srv:`` then ``srv.base_url``,
    ``srv.timings()``, ``srv.max_in_flight()`` and ``srv.cpu_s()``.

    Raises
    ------
    RuntimeError
        If the child does not report its address within ``start_timeout_s``.
    """

    def __init__(self, *, delay_s: float = 0.0, start_timeout_s: float = 120.0) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.delay_s = delay_s
        self.start_timeout_s = start_timeout_s
        self.base_url = ""

    def __enter__(self) -> "StubChatServerProcess":
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, self.delay_s), daemon=True,
                                    name="stub-chat-server")
        self._process.start()
        if not self._conn.poll(self.start_timeout_s):
            self._process.terminate()
            raise RuntimeError("the stub chat server process did not start")
        self.base_url = self._conn.recv()
        return self

    def timings(self) -> list[CallTiming]:
        """Requests answered so far, in reply order."""
        self._conn.send("timings")
        return [CallTiming(*t) for t in self._conn.recv()]

    def max_in_flight(self) -> int:
        """Most requests the server was answering at once."""
        self._conn.send("max_in_flight")
        return int(self._conn.recv())

    def cpu_s(self) -> float:
        """CPU time of the server process so far (``time.process_time`` there), seconds."""
        self._conn.send("cpu_s")
        return float(self._conn.recv())

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(10)
