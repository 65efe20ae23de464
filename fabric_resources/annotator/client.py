"""The annotator's chat client: one OpenAI-compatible ``POST {base_url}/chat/completions`` per
call, with Fabric's retry policy, reply validation and usage accounting.

Built on ``openai.AsyncOpenAI`` with the SDK's own retries off (``max_retries=0``); retries are
a tenacity policy here so that they are counted and bounded by ``annotation.call_retries``:

* retried (at most ``call_retries`` times): HTTP 429 (after the response's ``Retry-After``
  seconds when it sends one, else exponential backoff — both capped at the endpoint's
  ``max_backoff_s``; :class:`~fabric_resources.models.http_retry.RetryPolicy`), HTTP 5xx,
  timeouts and connection failures;
* failed at once: every other 4xx, and a 2xx body the SDK cannot read;
* not sent: every call after :data:`UNREACHABLE_AFTER_CALLS` calls in a row timed out or could
  not connect (after their retries) — the endpoint is down or hangs.

Each attempt is bounded by the endpoint's ``timeout_s`` as a whole (``asyncio.timeout``), not
only per read. Cancelling the awaiting task cancels the request in flight.

A reply is accepted only with exactly one choice, ``finish_reason == "stop"``, no refusal and
non-empty content of at most ``max_tokens`` × :data:`MAX_CHARS_PER_TOKEN` characters; anything
else is :class:`MalformedOutput` (the caller retries the chain at a
higher temperature — a call retry would resend the same request). Token usage is counted for
every reply that arrives, malformed or not.

The API key is read once from an owner-only file
(:func:`~fabric_resources.models.api_key.read_api_key`), sent only as ``Authorization: Bearer``
and masked out of every error message; without a key file no ``Authorization`` header is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx2
import openai
import tenacity

from fabric_resources.config import AnnotationConfig, HttpEndpointConfig
from fabric_resources.models.api_key import ApiKey, read_api_key
from fabric_resources.models.http_retry import RetryPolicy, parse_retry_after

__all__ = ["AnnotatorError", "CallCounters", "CallFailed", "ChatClient", "ChatReply", "MalformedOutput"]

log = logging.getLogger(__name__)

FailureReason = Literal["status", "rate-limited", "server-error", "timeout", "transport", "response", "unreachable"]
"""Why a call failed: a 4xx other than 429; 429 after the last retry; 5xx after the last retry;
a timeout after the last retry; a connection failure after the last retry; a 2xx body the SDK
could not read; not sent, the endpoint being unreachable (:data:`UNREACHABLE_AFTER_CALLS`)."""

#: Calls in a row that ended in a timeout or a connection failure after all their retries, after
#: which a client sends no more: each later call fails at once (``unreachable``). A client serves
#: one annotation run, and a run's parses are annotated one after another: against an endpoint
#: that accepts connections and never answers, every chain of every excerpt waited
#: (1 + ``call_retries``) × ``timeout_s`` (defaults: ~2 minutes a chain, three chains an excerpt),
#: so a run of 1,000 small documents would hold ``fabric ingest`` for days. Any reply resets it;
#: the next run (``fabric ingest`` retries failed annotations) tries the endpoint again.
UNREACHABLE_AFTER_CALLS = 3

_DETAIL_CHARS = 200
#: Characters of content one output token can account for, generously (English runs ~4, the longest
#: tokens of common vocabularies are runs of spaces). A reply longer than ``max_tokens`` times this
#: came from a server that ignored ``max_tokens``: its content is not read (grounding aligns every
#: returned statement and quote against the excerpt: 40 junk statements of 2,700 letters, a 110 kB
#: reply, took 320 s).
MAX_CHARS_PER_TOKEN = 16
_NO_KEY = "no-key"  # the SDK insists on a key; without a key file the header is omitted anyway
#: Bytes of one reply body read at most. The SDK reads a whole body before Fabric sees it, so a
#: server streaming without end held it in memory until ``timeout_s`` (loopback: gigabytes). A
#: chat reply is a few kilobytes; even ``max_tokens`` 32,768 at :data:`MAX_CHARS_PER_TOKEN`
#: characters, JSON-escaped (6 bytes a character), stays under it.
MAX_REPLY_BYTES = 8 * 1024 * 1024


class _ReplyTooLarge(Exception):
    """A reply body past :data:`MAX_REPLY_BYTES` (raised while it is read; not retried)."""


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner, self._limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise _ReplyTooLarge(f"reply body past {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport, each response body cut off (:class:`_ReplyTooLarge`) past
    :data:`MAX_REPLY_BYTES`, read at the time it is read, not after."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        response.stream = _BoundedStream(response.stream, MAX_REPLY_BYTES)
        return response


class AnnotatorError(Exception):
    """Base of the annotator's typed errors."""


class MalformedOutput(AnnotatorError):
    """A reply arrived but is unusable: not exactly one choice, ``finish_reason`` other than
    ``"stop"``, a refusal, empty or over-long content, or (raised by the producer) content that is not JSON of
    the stage schema or breaks a shape check. ``detail`` says which."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class CallFailed(AnnotatorError):
    """No usable reply after the call-retry budget, or a failure that is never retried.

    Attributes
    ----------
    reason : FailureReason
    status : int | None
        HTTP status of the last attempt, ``None`` when no response arrived.
    attempts : int
        Requests made (1 + retries).
    """

    def __init__(self, detail: str, *, reason: FailureReason, status: int | None, attempts: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reason = reason
        self.status = status
        self.attempts = attempts

    def __str__(self) -> str:
        status = f"HTTP {self.status}" if self.status is not None else self.reason
        return f"{status} after {self.attempts} attempt(s): {self.detail}"


@dataclass
class CallCounters:
    """Running totals of one batch (mutable; pass one to :meth:`ChatClient.complete`).

    ``calls`` counts HTTP requests sent (every attempt), ``call_retries`` the retried attempts,
    tokens come from each reply's ``usage`` (``replies_without_usage`` counts replies lacking
    it), ``call_time_s`` is wall time inside requests and retry waits.
    """

    calls: int = 0
    call_retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    replies_without_usage: int = 0
    call_time_s: float = 0.0


@dataclass(frozen=True)
class ChatReply:
    """A validated reply: the message content (a JSON text under strict schemas), the usage of
    this reply, and the attempts it took."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int


class _AttemptFailed(Exception):
    def __init__(self, detail: str, *, reason: FailureReason, status: int | None, retryable: bool,
                 retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reason = reason
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class ChatClient:
    """A chat-completions client for one endpoint (``annotation.endpoint``).

    Parameters
    ----------
    endpoint : HttpEndpointConfig
        ``base_url`` (e.g. ``http://127.0.0.1:8080/v1``), ``model``, ``api_key_file``,
        ``timeout_s`` (per attempt, whole request), ``initial_backoff_s``, ``max_backoff_s``.
        Its ``max_retries`` is not used: ``call_retries`` governs.
    call_retries : int
        Extra attempts after a retryable failure (``annotation.call_retries``, >= 0).
    sleep : async callable, optional
        Waits between attempts (``asyncio.sleep``; tests may record instead).

    Raises
    ------
    ApiKeyFileError
        At construction, when ``api_key_file`` is set but missing, empty, or readable by group
        or others.
    ValueError
        If ``call_retries < 0``.

    Notes
    -----
    The underlying ``openai.AsyncOpenAI`` is bound to an event loop; it is created lazily in the
    running loop and closed by :meth:`aclose` (or at the end of the last :meth:`session`).
    """

    def __init__(
        self,
        endpoint: HttpEndpointConfig,
        *,
        call_retries: int,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if call_retries < 0:
            raise ValueError(f"call_retries must be >= 0, got {call_retries}")
        self.endpoint = endpoint
        self.base_url = endpoint.base_url.rstrip("/")
        self.model = endpoint.model
        self.call_retries = call_retries
        self.policy = RetryPolicy(call_retries, endpoint.initial_backoff_s, endpoint.max_backoff_s)
        self._key: ApiKey | None = read_api_key(endpoint.api_key_file)
        self._sleep = sleep
        self._client: openai.AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions = 0
        self._unreachable_calls = 0  # calls in a row that timed out or could not connect

    @classmethod
    def from_config(cls, annotation: AnnotationConfig) -> "ChatClient":
        """The client ``annotation`` describes.

        Raises
        ------
        ValueError
            If ``annotation.endpoint`` is not set.
        ApiKeyFileError
            See the class.
        """
        if annotation.endpoint is None:
            raise ValueError("annotation.endpoint is not configured")
        return cls(annotation.endpoint, call_retries=annotation.call_retries)

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.base_url!r}, model={self.model!r})"

    def _openai(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = openai.AsyncOpenAI(
                base_url=self.base_url, api_key=str(self._key) if self._key else _NO_KEY,
                max_retries=0, timeout=self.endpoint.timeout_s,
                http_client=openai.DefaultAsyncHttpxClient(transport=_BoundedTransport()),
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connections of the current event loop's SDK client."""
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator["ChatClient"]:
        """``async with client.session():`` — connections are closed when the last session ends."""
        self._sessions += 1
        try:
            yield self
        finally:
            self._sessions -= 1
            if self._sessions == 0:
                await self.aclose()

    def _mask(self, text: str) -> str:
        if self._key:
            text = text.replace(str(self._key), "***")
        return " ".join(text.split())[:_DETAIL_CHARS]

    async def _attempt(self, params: dict[str, Any], counters: CallCounters) -> Any:
        client = self._openai()
        counters.calls += 1
        try:
            async with asyncio.timeout(self.endpoint.timeout_s):
                return await client.chat.completions.create(**params)
        except _ReplyTooLarge as exc:
            raise _AttemptFailed(str(exc), reason="response", status=None, retryable=False) from None
        except (TimeoutError, openai.APITimeoutError):
            raise _AttemptFailed(f"no reply within timeout_s={self.endpoint.timeout_s}",
                                 reason="timeout", status=None, retryable=True) from None
        except openai.APIConnectionError as exc:
            raise _AttemptFailed(f"connection failed: {type(exc).__name__}", reason="transport",
                                 status=None, retryable=True) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            detail = self._mask(f"{type(exc).__name__}: {exc.message}")
            if status == 429:
                retry_after = exc.response.headers.get("retry-after")
                ms = exc.response.headers.get("retry-after-ms")
                wait = parse_retry_after(retry_after)
                if ms is not None and parse_retry_after(ms) is not None:
                    wait = parse_retry_after(ms) / 1000.0  # type: ignore[operator]
                raise _AttemptFailed(detail, reason="rate-limited", status=status, retryable=True,
                                     retry_after_s=wait) from None
            if status >= 500:
                raise _AttemptFailed(detail, reason="server-error", status=status, retryable=True) from None
            raise _AttemptFailed(detail, reason="status", status=status, retryable=False) from None
        except openai.APIError as exc:  # e.g. APIResponseValidationError: a body the SDK cannot read
            raise _AttemptFailed(self._mask(f"{type(exc).__name__}: {exc.message}"), reason="response",
                                 status=getattr(exc, "status_code", None), retryable=False) from None
        except ValueError as exc:  # a JSON content type whose body is not JSON (or not UTF-8)
            raise _AttemptFailed(self._mask(f"reply body is not JSON: {type(exc).__name__}"), reason="response",
                                 status=None, retryable=False) from None

    def _wait_s(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return self.policy.delay_s(state.attempt_number, getattr(exc, "retry_after_s", None))

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        response_format: dict[str, Any],
        temperature: float,
        max_tokens: int,
        counters: CallCounters | None = None,
    ) -> ChatReply:
        """One chat completion under the retry policy, validated.

        Parameters
        ----------
        messages : sequence of {"role", "content"}
        response_format : dict
            Sent as-is (a strict ``json_schema`` format, :attr:`Stage.response_format`).
        temperature : float
        max_tokens : int
            Sent as ``max_tokens`` (``annotation.max_output_tokens``; the field every
            OpenAI-compatible server accepts).
        counters : CallCounters, optional
            Updated in place with requests, retries, usage and time.

        Returns
        -------
        ChatReply

        Raises
        ------
        MalformedOutput
            The reply arrived but is unusable (see the module docstring); never retried here.
        CallFailed
            A non-retryable failure, or a retryable one after ``call_retries`` retries.
        asyncio.CancelledError
            When the awaiting task is cancelled (nothing is retried or counted as failed).
        """
        counters = counters if counters is not None else CallCounters()
        if self._unreachable_calls >= UNREACHABLE_AFTER_CALLS:
            raise CallFailed(f"endpoint unreachable: {self._unreachable_calls} calls in a row timed out or could "
                             "not connect after their retries; not called again in this run",
                             reason="unreachable", status=None, attempts=0)
        params = {
            "model": self.model, "messages": list(messages), "response_format": response_format,
            "temperature": temperature, "max_tokens": max_tokens,
        }
        if not self._key:
            params["extra_headers"] = {"Authorization": openai.omit}
        attempts = 0

        async def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            return await self._attempt(params, counters)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            counters.call_retries += 1
            exc = state.outcome.exception() if state.outcome else None
            log.warning("annotator_call.retry base_url=%s reason=%s status=%s retry=%d/%d wait_s=%.3f",
                        self.base_url, getattr(exc, "reason", "?"), getattr(exc, "status", None),
                        state.attempt_number, self.call_retries,
                        state.next_action.sleep if state.next_action else 0.0)

        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, _AttemptFailed) and e.retryable),
            stop=tenacity.stop_after_attempt(self.call_retries + 1),
            wait=self._wait_s,
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        started = time.perf_counter()
        try:
            completion = await retrying(attempt)
        except _AttemptFailed as exc:
            if exc.reason in ("timeout", "transport"):
                self._unreachable_calls += 1
            else:  # the endpoint answered
                self._unreachable_calls = 0
            raise CallFailed(exc.detail, reason=exc.reason, status=exc.status, attempts=attempts) from None
        finally:
            counters.call_time_s += time.perf_counter() - started
        self._unreachable_calls = 0
        return self._validated(completion, attempts, counters, max_tokens)

    @staticmethod
    def _validated(completion: Any, attempts: int, counters: CallCounters, max_tokens: int) -> ChatReply:
        # The SDK builds the reply objects without validating them (``construct``): every field
        # may hold any JSON value, so each is read by type here, never trusted.
        usage = getattr(completion, "usage", None)
        prompt_tokens = _count(getattr(usage, "prompt_tokens", None))
        completion_tokens = _count(getattr(usage, "completion_tokens", None))
        if prompt_tokens is None and completion_tokens is None:
            counters.replies_without_usage += 1
        counters.prompt_tokens += prompt_tokens or 0
        counters.completion_tokens += completion_tokens or 0
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or len(choices) != 1:
            count = len(choices) if isinstance(choices, list) else 0
            raise MalformedOutput(f"{count} choices, expected exactly 1")
        choice = choices[0]
        finish_reason = getattr(choice, "finish_reason", None)
        if finish_reason != "stop":
            raise MalformedOutput(f"finish_reason={finish_reason!r}, expected 'stop'"[:_DETAIL_CHARS])
        message = getattr(choice, "message", None)
        if getattr(message, "refusal", None):
            raise MalformedOutput("the model refused")
        content = getattr(message, "content", None)
        if not isinstance(content, str) or not content.strip():
            raise MalformedOutput("empty content")
        if len(content) > max_tokens * MAX_CHARS_PER_TOKEN:
            raise MalformedOutput(f"{len(content)} characters of content for max_tokens={max_tokens}: "
                                  "the server did not keep to max_tokens")
        return ChatReply(content, prompt_tokens or 0, completion_tokens or 0, attempts)


def _count(value: Any) -> int | None:
    """A token count of a reply's ``usage``: a non-negative int, else ``None`` (absent or not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
