"""Who may talk to the server: Host and Origin checks, token files, bearer comparison.

* **Host** (DNS rebinding): a request whose ``Host`` is not a loopback name, the bound host or a
  configured ``server.allowed_hosts`` entry is answered 421 (Misdirected Request).
* **Origin** (cross-site requests from a browser): a request that carries an ``Origin`` other than
  a loopback origin of this server's port or a configured ``server.allowed_origins`` entry is
  answered 403; requests without ``Origin`` (non-browser clients) pass.
* **Tokens**: ``<home>/admin-token`` guards the admin routes; ``<home>/read-token`` the read
  routes when the server binds an interface other than loopback. Each is created exclusively
  (``O_CREAT | O_EXCL``, mode 0600) when missing; one that group or others can read, or that
  another user owns, makes the server refuse to start. Tokens are compared in constant time
  (:func:`hmac.compare_digest`) and never logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

ADMIN_TOKEN_FILE = "admin-token"
#: Host names every server accepts (RFC 6761 ``localhost`` and the loopback addresses).
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_TOKEN_BYTES = 32  # 256 bits from secrets.token_urlsafe: far beyond guessing over a network


class TokenFileError(Exception):
    """A token file that is unsafe (readable by group or others, another owner, not a regular
    file), unreadable, or whose token no header carries (not printable ASCII); the server does
    not start."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The host part of a ``Host`` header (``[::1]:7433`` → ``::1``), lower-cased; None if malformed."""
    header = header.strip().lower()
    if not header or any(c.isspace() or c in "/@?#\\" for c in header):
        return None
    if header.startswith("["):
        end = header.find("]")
        rest = header[end + 1:]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return header[1:end] or None
    name, _, port = header.partition(":")
    if port and not port.isdigit():
        return None
    return name or None


class OriginPolicy:
    """The Host and Origin rules of one server (bound to ``bind_host:port``)."""

    def __init__(self, bind_host: str, port: int, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = ()) -> None:
        self.port = port
        self.hosts = LOOPBACK_HOSTS | {h.lower().strip("[]") for h in (bind_host, *allowed_hosts)}
        self.origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)

    def host_ok(self, header: str | None) -> bool:
        """The request's ``Host`` names this server."""
        name = host_name(header) if header is not None else None
        return name is not None and (name in self.hosts or is_loopback(name))

    def origin_ok(self, header: str | None) -> bool:
        """No ``Origin``, a loopback origin with this server's port, or a configured one."""
        if header is None:
            return True
        origin = header.strip().lower().rstrip("/")
        if origin in self.origins:
            return True
        try:
            parts = urlsplit(origin)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.hostname is not None \
            and is_loopback(parts.hostname) and port == self.port


def ensure_token(path: Path) -> str:
    """The token in ``path``, creating it (exclusively, mode 0600, 256 random bits) when missing.

    Raises
    ------
    TokenFileError
        The file is not a regular file of this user, group or others may read it, it is empty, or
        its token holds a character other than printable ASCII.
    """
    path = Path(path)
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return load_token(path)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    return token


def load_token(path: Path) -> str:
    """Read an existing token file, refusing an unsafe one (see :class:`TokenFileError`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise TokenFileError(f"{path}: cannot open the token file ({exc.strerror})") from None
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TokenFileError(f"{path}: not a regular file")
        if st.st_uid != os.getuid():
            raise TokenFileError(f"{path}: owned by another user")
        if st.st_mode & 0o077:
            raise TokenFileError(f"{path}: group or others may read it (mode {stat.S_IMODE(st.st_mode):o}); "
                                 f"run chmod 600 {path}")
        token = f.read(4096).strip()
    if len(token) < 16:
        raise TokenFileError(f"{path}: holds no token (at least 16 characters)")
    if not all(" " <= c <= "~" for c in token):
        # A header carries bytes a client encodes as it likes: a token with other characters (a
        # passphrase with umlauts, read here as U+FFFD) could never match, and each request with
        # a bearer made the comparison raise (a 500).
        raise TokenFileError(f"{path}: the token holds a character other than printable ASCII "
                             "(letters, digits, punctuation, spaces); write one of those only")
    return token


def bearer_matches(authorization: str | None, *tokens: str | None) -> bool:
    """``Authorization: Bearer <t>`` with ``t`` equal to one of ``tokens`` (constant-time compare)."""
    if not authorization:
        return False
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    given_b = given.strip().encode("utf-8", "surrogateescape")
    ok = False
    for token in tokens:
        if token:  # every token is compared, so the time does not say which one matched
            ok |= hmac.compare_digest(given_b, token.encode("utf-8", "surrogateescape"))
    return ok


def is_admin(authorizations: list[str], token: str | None) -> bool:
    """Whether a request's ``Authorization`` headers (all of them, in order) carry the admin token:
    exactly one header, ``Bearer <token>``. Two are refused whichever holds the token: a proxy or
    log that reads the other saw other credentials (trial 20d)."""
    return token is not None and len(authorizations) == 1 and bearer_matches(authorizations[0], token)


#: What a request to an admin route without the admin token is told (by the guard, before its body
#: is read, and by the routes themselves).
ADMIN_TOKEN_NEEDED = ("admin routes need Authorization: Bearer <admin token>, the token being the content of the "
                      "file admin-token in the served home")
#: Path prefixes of the routes that need the admin token.
ADMIN_PREFIXES = ("/v1/admin/", "/v1/operations/")
