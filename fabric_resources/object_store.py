"""What an object store's refusal means: the store itself cannot be used (a missing bucket,
refused credentials, no answer), as opposed to damaged data. Lance words both as ``OSError`` or
``ValueError``; :func:`store_problem` tells them apart from its text."""

from __future__ import annotations

import re


class TableStoreUnavailableError(RuntimeError):
    """The object store that holds the tables cannot be used: a fault of the deployment, not of
    the data. ``reason`` is stable: ``bucket-missing``, ``access-denied`` (credentials refused) or
    ``unreachable``. The message names the store's URI and the store's answer, never a credential."""

    def __init__(self, message: str, *, problem: str) -> None:
        super().__init__(message)
        #: ``"<reason> (<the store's word>)"``, as :func:`store_problem` words it.
        self.problem = problem
        self.reason = problem.split(" ")[0]


#: A fragment of the object store's (or the HTTP client's) answer, as Lance words its error → reason.
_STORE_PROBLEMS = (("NoSuchBucket", "bucket-missing"), ("InvalidAccessKeyId", "access-denied"),
                   ("SignatureDoesNotMatch", "access-denied"), ("AccessDenied", "access-denied"),
                   ("403 Forbidden", "access-denied"),
                   # no credentials at all (none configured, none in the environment): Lance's probe
                   # fails at once, but its writes retried for minutes (hostile trial 11c)
                   ("Failed to get AWS credentials", "access-denied"), ("Connection refused", "unreachable"),
                   ("error sending request", "unreachable"), ("timed out", "unreachable"))


def store_problem(exc: BaseException) -> str | None:
    """``"<reason> (<the store's word>)"`` when Lance's error ``exc`` says the object store itself
    cannot be used (reasons as :class:`TableStoreUnavailableError`'s), else None (the data's fault).

    >>> store_problem(OSError("... 404 Not Found: <Error><Code>NoSuchBucket</Code> ..."))
    'bucket-missing (NoSuchBucket)'
    >>> store_problem(ValueError("Dataset at path t.lance was not found")) is None
    True
    """
    text = str(exc)
    for fragment, reason in _STORE_PROBLEMS:
        if fragment in text:
            code = re.search(r"<Code>([A-Za-z]+)</Code>", text)
            return f"{reason} ({code.group(1) if code else fragment})"
    return None


__all__ = ["TableStoreUnavailableError", "store_problem"]
