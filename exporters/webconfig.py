"""``--web-config FILE``: TLS and basic auth for ``/metrics``, in node_exporter's format.

The file is the one Prometheus' exporter-toolkit reads (node_exporter ``--web.config.file``),
so a site that already secures node_exporter reuses it as it is::

    tls_server_config:
      cert_file: server.crt          # relative paths: to the file's folder
      key_file: server.key
      client_ca_file: ca.crt         # optional: mutual TLS
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (default)
      min_version: TLS12             # TLS12 (default) or TLS13
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

Any other key is an error (a typo must not leave the port open); a bad file is one line naming
it and the key. prometheus_client's ``start_http_server`` takes the same certificate, key and
client CA; the server here wraps its own bounded server the same way and checks basic auth in
a WSGI layer, as exporter-toolkit checks it before the handler.
"""

from __future__ import annotations

import base64
import binascii
import ssl
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.errors import InputError

CLIENT_AUTH_TYPES = ("NoClientCert", "RequireAndVerifyClientCert")
TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}
_KEYS = {"tls_server_config", "basic_auth_users"}
REALM = "soak"
# A web config, certificate, key or CA bundle is kilobytes; a CA bundle of a whole system 200 KiB.
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class WebConfig:
    """What ``/metrics`` asks of a client; ``None`` / empty: that part is off."""

    source: str
    cert_file: Path | None = None
    key_file: Path | None = None
    client_ca_file: Path | None = None
    client_auth_type: str = "NoClientCert"
    min_version: str = "TLS12"
    basic_auth_users: Mapping[str, str] = field(default_factory=dict)  # user -> bcrypt hash

    @property
    def tls(self) -> bool:
        return self.cert_file is not None


def load_web_config(path: str | Path, name: str = "--web-config") -> WebConfig:
    """Read and check ``path``; ``InputError`` names it and the key that is wrong."""
    import yaml

    from soak.tomlfile import read_regular_text

    path = Path(path)
    where = f"{name} {path}"
    text = read_regular_text(path, name, InputError, MAX_FILE_BYTES)  # /dev/zero: one line, not 24 GB
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{where}: cannot read it ({str(exc).splitlines()[0]})") from None
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a mapping of {', '.join(sorted(_KEYS))}")
    _unknown(doc, _KEYS, where, "")
    tls = doc.get("tls_server_config") or {}
    users = doc.get("basic_auth_users") or {}
    if not isinstance(tls, dict):
        raise InputError(f"{where}: tls_server_config must be a mapping")
    if not isinstance(users, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in users.items()):
        raise InputError(f"{where}: basic_auth_users must map user names to bcrypt hashes")
    _unknown(tls, _TLS_KEYS, where, "tls_server_config.")
    for user, hashed in users.items():
        if not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise InputError(f"{where}: basic_auth_users.{user} is not a bcrypt hash (htpasswd -nBC 10 {user})")

    def file(key: str) -> Path | None:
        value = tls.get(key)
        if value in (None, ""):
            return None
        p = Path(str(value))
        p = p if p.is_absolute() else path.parent / p
        # a certificate, key or CA is loaded by OpenSSL from its path: checked by the one reader
        # first (a regular file, at most MAX_FILE_BYTES), so a device or FIFO is one line
        read_regular_file(p, f"{where}: tls_server_config.{key}", InputError, MAX_FILE_BYTES)
        return p

    from soak.tomlfile import read_regular_file

    cert, key, ca = file("cert_file"), file("key_file"), file("client_ca_file")
    if tls and (cert is None or key is None):
        raise InputError(f"{where}: tls_server_config needs both cert_file and key_file")
    auth = str(tls.get("client_auth_type", "NoClientCert"))
    if auth not in CLIENT_AUTH_TYPES:
        raise InputError(f"{where}: tls_server_config.client_auth_type {auth!r}: expected one of "
                         f"{', '.join(CLIENT_AUTH_TYPES)}")
    if auth != "NoClientCert" and ca is None:
        raise InputError(f"{where}: tls_server_config.client_auth_type {auth} needs client_ca_file")
    version = str(tls.get("min_version", "TLS12"))
    if version not in TLS_VERSIONS:
        raise InputError(f"{where}: tls_server_config.min_version {version!r}: expected TLS12 or TLS13")
    cfg = WebConfig(str(path), cert, key, ca, auth, version, dict(users))
    if cfg.tls:
        tls_context(cfg)  # a key that does not match its certificate: one line now, not at the first scrape
    return cfg


def _unknown(doc: dict[str, Any], known: Iterable[str], where: str, prefix: str) -> None:
    extra = sorted(set(doc) - set(known))
    if extra:
        raise InputError(f"{where}: unknown key {prefix}{extra[0]} (expected {', '.join(sorted(known))})")


def tls_context(cfg: WebConfig) -> ssl.SSLContext:
    """The server-side TLS context of ``cfg`` (``InputError`` for a key or CA it cannot load)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[cfg.min_version]
    try:
        ctx.load_cert_chain(str(cfg.cert_file), str(cfg.key_file))
        if cfg.client_ca_file is not None:
            ctx.load_verify_locations(str(cfg.client_ca_file))
    except (ssl.SSLError, OSError) as exc:
        raise InputError(f"--web-config {cfg.source}: cannot load the certificate, key or client CA "
                         f"({getattr(exc, 'reason', None) or exc})") from None
    if cfg.client_auth_type == "RequireAndVerifyClientCert":
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# bcrypt reads at most 72 bytes of a password (bcrypt 5 refuses more); a longer one is refused
# before any hashing, for a known user and an unknown one alike.
MAX_PASSWORD_BYTES = 72
# Verified (user, hash, password) kept so a scrape costs no bcrypt; as exporter-toolkit, a small
# bound. Only successes are kept: a flood of wrong passwords cannot push a good one out.
CACHE_SIZE = 100
# Failed checks a client may make before it is answered 429 without any hashing: a burst of
# FAILURE_BURST, then one more every FAILURE_REFILL_S. A scraper with a good password fails
# never; a typo in its config fails once a scrape.
FAILURE_BURST = 5
FAILURE_REFILL_S = 10.0
# Clients whose failures are remembered; the oldest is forgotten beyond this.
MAX_CLIENTS = 4096


def _cost(hashed: str) -> int:
    try:
        return int(hashed.split("$")[2])
    except (IndexError, ValueError):
        return 10


class BasicAuth:
    """Basic auth against ``users`` (user -> bcrypt hash) that a flood of wrong passwords cannot
    starve, as exporter-toolkit's: a verified (user, hash, password) is cached (a scrape with it
    costs a keyed hash, no bcrypt); bcrypt runs one check at a time (a flood's checks queue
    instead of taking every core); a client past its failures is answered 429 at once. An
    unknown user costs the same bcrypt work as a known one, at the users' own cost."""

    def __init__(self, users: Mapping[str, str], *, clock: Callable[[], float] | None = None) -> None:
        import hashlib
        import secrets
        import threading
        import time

        import bcrypt

        self.users = dict(users)
        self._clock = clock or time.monotonic
        self._key = secrets.token_bytes(32)  # the cache holds keyed digests, never a password
        self._hash = hashlib.blake2b
        self._cache: OrderedDict[bytes, None] = OrderedDict()
        self._failures: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)
        self._bcrypt = threading.Lock()
        self._lock = threading.Lock()
        cost = max((_cost(h) for h in self.users.values()), default=10)
        # an unknown user's check: a hash of the users' cost (a fixed cost-10 hash beside cost-12
        # users would tell the names apart by time)
        self._dummy = bcrypt.hashpw(secrets.token_bytes(16).hex().encode(), bcrypt.gensalt(rounds=cost))

    def _digest(self, user: str, hashed: str, password: bytes) -> bytes:
        return self._hash(b"\0".join((user.encode(), hashed.encode(), password)), key=self._key).digest()

    def _limited(self, client: str) -> bool:
        with self._lock:
            tokens, at = self._failures.get(client, (float(FAILURE_BURST), self._clock()))
            now = self._clock()
            tokens = min(float(FAILURE_BURST), tokens + (now - at) / FAILURE_REFILL_S)
            self._failures[client] = (tokens, now)
            return tokens < 1.0

    def _failed(self, client: str) -> None:
        with self._lock:
            tokens, at = self._failures.get(client, (float(FAILURE_BURST), self._clock()))
            self._failures[client] = (tokens - 1.0, at)
            self._failures.move_to_end(client)
            while len(self._failures) > MAX_CLIENTS:
                self._failures.popitem(last=False)

    def check(self, header: str | None, client: str) -> int:
        """200 (let through), 401 (refused) or 429 (this client failed too often)."""
        import bcrypt

        if not header or not header.startswith("Basic "):
            return 401
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return 401
        secret = password.encode("utf-8")
        hashed = self.users.get(user)
        if hashed is not None and len(secret) <= MAX_PASSWORD_BYTES:
            digest = self._digest(user, hashed, secret)
            with self._lock:
                if digest in self._cache:
                    self._cache.move_to_end(digest)
                    return 200
        if self._limited(client):
            return 429
        if len(secret) > MAX_PASSWORD_BYTES:
            self._failed(client)
            return 401
        with self._bcrypt:
            if hashed is None:
                bcrypt.checkpw(secret, self._dummy)  # the same work: the time does not tell which names exist
                ok = False
            else:
                ok = bool(bcrypt.checkpw(secret, ("$2b$" + hashed[4:]).encode()))  # $2y$ (htpasswd's) is $2b$
        if not ok:
            self._failed(client)
            return 401
        with self._lock:
            self._cache[self._digest(user, hashed, secret)] = None
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return 200


def basic_auth(app: Callable[..., Any], users: Mapping[str, str]) -> Callable[..., Any]:
    """``app`` behind HTTP basic auth against ``users`` (user -> bcrypt hash): 401 for a wrong
    or missing password, 429 for a client past its failures (:class:`BasicAuth`)."""
    if not users:
        return app
    auth = BasicAuth(users)

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        status = auth.check(environ.get("HTTP_AUTHORIZATION"), str(environ.get("REMOTE_ADDR", "")))
        if status == 200:
            return app(environ, start_response)
        if status == 429:
            start_response("429 Too Many Requests", [("Content-Type", "text/plain; charset=utf-8"),
                                                     ("Retry-After", str(int(FAILURE_REFILL_S)))])
            return [b"Too many failed logins\n"]
        start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                            ("WWW-Authenticate", f'Basic realm="{REALM}"')])
        return [b"Unauthorized\n"]

    return guarded


def _host_name(header: str) -> str:
    """The name of a ``Host`` header: ``[::1]:19400`` -> ``::1``, ``node0:19400`` -> ``node0``."""
    host = header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def host_allowed(header: str | None, names: Iterable[str]) -> bool:
    """Whether a request with ``Host: header`` may read ``/metrics`` when nothing else guards it.

    A DNS-rebinding page reaches a loopback port under its own name (``rebind.example``): its
    requests carry that name. Allowed: no ``Host`` (HTTP/1.0, curl --http1.0), an address
    (``127.0.0.1:19400``, ``[::1]:19400``, a pod's IP, as Prometheus' targets usually are),
    ``localhost``, a single-label name (a compose service, ``soak-exporter``: no public DNS name
    has one label), this host's own names, and ``names`` (``--allowed-host``)."""
    import ipaddress

    if header is None or not header.strip():
        return True
    host = _host_name(header)
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        pass
    if host == "localhost" or host.endswith(".localhost") or "." not in host:
        return True
    return host in {n.lower().rstrip(".") for n in names}


def host_check(app: Callable[..., Any], names: Iterable[str]) -> Callable[..., Any]:
    """``app`` answering 403 to a ``Host`` that ``host_allowed`` refuses."""
    allowed = tuple(names)

    def checked(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if host_allowed(environ.get("HTTP_HOST"), allowed):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"Forbidden: this Host is not one of this exporter's names (--allowed-host)\n"]

    return checked


def own_names(listen_host: str) -> tuple[str, ...]:
    """This host's names, and the one ``--listen`` gives."""
    import socket

    names = {socket.gethostname(), listen_host}
    try:
        names.add(socket.getfqdn())
    except OSError:
        pass
    return tuple(n for n in names if n)
