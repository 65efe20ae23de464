"""HTTP model endpoints: one JSON ``POST`` under a 429-only retry policy, with typed errors.

Policy (Data Store seed 003, section 8, "HTTP dense backend"): HTTP 429 is retried at most
``max_retries`` times with exponential backoff (``initial_backoff_s * 2**(k-1)`` before retry
``k``, capped at ``max_backoff_s``), or after the response's ``Retry-After`` seconds when it sends
one (still capped). Every other status, every transport failure and every timeout is raised at
once as :class:`ModelEndpointError`. Each retry is logged at WARNING as ``model_call.http_retry``;
the count of the last call is :attr:`ModelEndpoint.last_retries`.

The API key is read once (owner-only file, :func:`~fabric_resources.models.api_key.read_api_key`),
sent only as ``Authorization: Bearer``, and never enters a log line or an error message.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import tenacity

from fabric_resources.config import HttpEndpointConfig
from fabric_resources.models.api_key import ApiKey, read_api_key

log = logging.getLogger(__name__)

ErrorReason = Literal["status", "rate-limited", "timeout", "transport", "response"]
"""Why a call failed: a non-2xx status other than 429; 429 after the last retry; a timeout; a
connection/protocol failure; a 2xx response whose content is unusable."""

_BODY_EXCERPT_CHARS = 200


class ModelEndpointError(Exception):
    """A call to an HTTP model endpoint failed.

    Attributes
    ----------
    url : str
        The URL that was called (base URL + path; it never holds the key).
    status : int | None
        The HTTP status, or ``None`` when no response arrived (timeout, transport).
    reason : ErrorReason
    retries : int
        429 retries made before the failure.
    """

    def __init__(
        self, detail: str, *, url: str, reason: ErrorReason, status: int | None = None, retries: int = 0
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.url = url
        self.reason = reason
        self.status = status
        self.retries = retries

    def __str__(self) -> str:
        status = f"HTTP {self.status}" if self.status is not None else self.reason
        suffix = f" (after {self.retries} retries)" if self.retries else ""
        return f"POST {self.url}: {status}: {self.detail}{suffix}"


class RateLimitedError(ModelEndpointError):
    """HTTP 429; retried by the policy, raised once retries are spent.

    ``retry_after_s`` is the response's ``Retry-After`` in seconds, or ``None`` when absent or
    not a non-negative number (the HTTP-date form is not honoured).
    """

    def __init__(self, detail: str, *, url: str, retry_after_s: float | None) -> None:
        super().__init__(detail, url=url, reason="rate-limited", status=429)
        self.retry_after_s = retry_after_s


class ModelResponseError(ModelEndpointError):
    """A 2xx response whose content cannot be used (not JSON, wrong shape, invalid values)."""

    def __init__(self, detail: str, *, url: str, status: int = 200) -> None:
        super().__init__(detail, url=url, reason="response", status=status)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header value, or ``None`` when absent or unusable.

    >>> parse_retry_after("2"), parse_retry_after("0.5"), parse_retry_after(None)
    (2.0, 0.5, None)
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None, parse_retry_after("-1") is None
    (True, True)
    """
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class _PolicyWait(tenacity.wait.wait_base):
    """tenacity wait strategy: :meth:`RetryPolicy.delay_s` of the 429 that just arrived."""

    def __init__(self, policy: "RetryPolicy") -> None:
        self.policy = policy

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        return self.policy.delay_s(retry_state.attempt_number, getattr(exc, "retry_after_s", None))


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retry of HTTP 429 only.

    ``delay_s(k)`` before retry ``k`` (1-based) is ``min(initial_backoff_s * 2**(k-1),
    max_backoff_s)``, or ``min(Retry-After, max_backoff_s)`` when the 429 carried one. Values
    come from :class:`~fabric_resources.config.HttpEndpointConfig` (:meth:`from_config`).
    """

    max_retries: int
    initial_backoff_s: float
    max_backoff_s: float

    @classmethod
    def from_config(cls, config: HttpEndpointConfig) -> "RetryPolicy":
        return cls(config.max_retries, config.initial_backoff_s, config.max_backoff_s)

    def wait(self) -> tenacity.wait.wait_base:
        """This policy as a tenacity wait strategy."""
        return _PolicyWait(self)

    def delay_s(self, retry: int, retry_after_s: float | None = None) -> float:
        """The wait before retry ``retry`` (1-based), in seconds.

        >>> p = RetryPolicy(max_retries=5, initial_backoff_s=0.5, max_backoff_s=3.0)
        >>> [p.delay_s(k) for k in range(1, 5)], p.delay_s(1, retry_after_s=2.0), p.delay_s(1, 60.0)
        ([0.5, 1.0, 2.0, 3.0], 2.0, 3.0)
        """
        if retry_after_s is not None:
            return min(retry_after_s, self.max_backoff_s)
        return min(self.initial_backoff_s * 2.0 ** min(retry - 1, 64), self.max_backoff_s)


@dataclass(frozen=True)
class EndpointFacts:
    """What readiness and identity may report about an endpoint: never the key, only its path."""

    base_url: str
    model: str
    timeout_s: float
    api_key_file: str | None
    max_retries: int


class ModelEndpoint:
    """One configured HTTP model endpoint: ``post_json(path, payload)`` under :class:`RetryPolicy`.

    ``timeout_s`` bounds each phase of each attempt (connect, write, each read, pool wait: httpx
    semantics), not the whole call. Safe to share between threads; :attr:`last_retries` is per
    thread.

    Raises
    ------
    ApiKeyFileError
        At construction, when ``api_key_file`` is set but missing, empty or not owner-only.
    ValueError
        At construction, when ``base_url`` is not an absolute ``http(s)`` URL.
    """

    def __init__(self, config: HttpEndpointConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        url = httpx.URL(config.base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url {config.base_url!r} is not an absolute http(s) URL")
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self.policy = RetryPolicy.from_config(config)
        self._key: ApiKey | None = read_api_key(config.api_key_file)
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.Client(timeout=config.timeout_s, headers=headers)
        self._sleep = sleep
        self._local = threading.local()

    @property
    def facts(self) -> EndpointFacts:
        c = self.config
        return EndpointFacts(self.base_url, c.model, c.timeout_s, c.api_key_file, c.max_retries)

    @property
    def last_retries(self) -> int:
        """429 retries made by this thread's last :meth:`post_json` (0 before any call)."""
        return getattr(self._local, "retries", 0)

    def post_json(self, path: str, payload: Any) -> Any:
        """``POST {base_url}/{path}`` with a JSON body; the decoded JSON of the 2xx response.

        Raises
        ------
        RateLimitedError
            HTTP 429 still returned after ``max_retries`` retries.
        ModelEndpointError
            Any other non-2xx status, a timeout or a transport failure (never retried).
        ModelResponseError
            A 2xx response that is not JSON.
        """
        url = f"{self.base_url}/{path.lstrip('/')}"
        attempts = 0

        def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            return self._post_once(url, payload)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(RateLimitedError),
            stop=tenacity.stop_after_attempt(self.policy.max_retries + 1),
            wait=self.policy.wait(),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            body = retrying(attempt)
        except ModelEndpointError as exc:
            exc.retries = attempts - 1
            log.debug("model_call.failed url=%s reason=%s status=%s retried_attempts=%d",
                      url, exc.reason, exc.status, attempts - 1)
            raise
        finally:
            self._local.retries = attempts - 1
        log.debug("model_call.completed url=%s retried_attempts=%d", url, attempts - 1)
        return body

    def _post_once(self, url: str, payload: Any) -> Any:
        try:
            response = self._client.post(url, json=payload)
        except httpx.TimeoutException as exc:
            raise ModelEndpointError(
                f"{type(exc).__name__} after timeout_s={self.config.timeout_s}", url=url, reason="timeout"
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelEndpointError(f"{type(exc).__name__}: {exc}", url=url, reason="transport") from exc
        if response.status_code == 429:
            raise RateLimitedError(
                self._excerpt(response), url=url,
                retry_after_s=parse_retry_after(response.headers.get("Retry-After")),
            )
        if not response.is_success:
            raise ModelEndpointError(self._excerpt(response), url=url, reason="status",
                                     status=response.status_code)
        try:
            return response.json()
        except ValueError:
            raise ModelResponseError(f"response is not JSON: {self._excerpt(response)}", url=url,
                                     status=response.status_code) from None

    def _excerpt(self, response: httpx.Response) -> str:
        """The start of the body, with the key masked should the server echo it back."""
        text = response.text[:_BODY_EXCERPT_CHARS * 4]
        if self._key:
            text = text.replace(self._key, "***")
        text = " ".join(text.split())[:_BODY_EXCERPT_CHARS]
        return text or "(empty body)"

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        wait_s = state.next_action.sleep if state.next_action else 0.0
        url = getattr(state.outcome.exception(), "url", self.base_url) if state.outcome else self.base_url
        log.warning("model_call.http_retry url=%s status=429 retry=%d/%d wait_s=%.3f",
                    url, state.attempt_number, self.policy.max_retries, wait_s)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "ModelEndpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
