"""Serve ``/metrics`` from a private registry with prometheus_client's WSGI app and server.

The address family is picked the way ``prometheus_client.start_http_server`` picks it (from
``getaddrinfo`` of the host), so ``[::1]:PORT`` listens on IPv6 and ``127.0.0.1:PORT`` on IPv4.
A scrape only renders the cached snapshot, so it answers in milliseconds whatever npu-smi
is doing.

The library's server starts one thread per connection and waits on a client for ever; a port
left open to a network would then let half-open connections pile up threads without end.
Three limits bound it, each a fixed cost whatever the clients do:

* :data:`READ_TIMEOUT_S`: a connection that sends nothing (or sends part of a request, or does
  not read the answer) for this long is closed;
* :data:`MAX_CONNECTIONS_PER_CLIENT`: one client address holds at most this many of them (its
  oldest one not yet sent its request makes room for its new one), so a flood from one
  address leaves the other slots to the scrapers;
* :data:`MAX_CONNECTIONS`: at most this many connections are served at once. When a new one
  arrives at the limit, the oldest connection that has not yet sent its whole request is
  closed to make room (a scraper sends its request at once, so it is never that one); when
  every slot is busy answering, the new connection is closed unanswered.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from wsgiref.simple_server import WSGIRequestHandler

from prometheus_client.exposition import ThreadingWSGIServer, _get_best_family, make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from exporters.listen import DEFAULT_LISTEN, DEFAULT_PORT, parse_listen
from exporters.webconfig import WebConfig, basic_auth, host_check, own_names, tls_context
from soak.errors import InputError

__all__ = ["DEFAULT_LISTEN", "DEFAULT_PORT", "MAX_CONNECTIONS", "READ_TIMEOUT_S", "MetricsServer",
           "check_listen", "parse_listen", "serve"]

log = logging.getLogger("soak.exporter")

# Prometheus sends its request as soon as it connects; 10 s is its default scrape timeout, so
# a client silent for that long has given up anyway.
READ_TIMEOUT_S = 10.0
# A node is scraped by one or two Prometheus servers and now and then a person with curl.
MAX_CONNECTIONS = 32
# Connections of one client address at once: a Prometheus server holds one per target; the
# rest of the slots stay for other clients while one address floods the port.
MAX_CONNECTIONS_PER_CLIENT = 8
# How long a new connection waits for the slot of a closed idle one (its thread to end).
_SLOT_WAIT_S = 1.0


class _Handler(WSGIRequestHandler):
    timeout = READ_TIMEOUT_S  # StreamRequestHandler puts it on the socket: reads and writes
    server: _BoundedServer

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            # the TLS handshake here, in the connection's thread and under its read timeout,
            # not in accept(): a client that never finishes it would stop the whole server
            self.request.settimeout(self.timeout)
            self.request.do_handshake()
        super().setup()

    def log_message(self, format: str, *args: object) -> None:  # the stdlib's signature: 'format' shadows a builtin
        pass  # one line per scrape would flood a 72 h log

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.server.request_read(self.request)  # being answered now: no longer closed for room
        return ok


class _BoundedServer(ThreadingWSGIServer):
    """The library's thread-per-connection server with the two limits of this module."""

    # socketserver's backlog of 5 drops the SYN of a scrape that arrives in a burst of
    # connections, and the client only tries again a second later.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[_Handler], *,
                 max_connections: int = MAX_CONNECTIONS,
                 max_per_client: int = MAX_CONNECTIONS_PER_CLIENT) -> None:
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self._clients: dict[socket.socket, str] = {}  # connection -> its client's address
        self._per_client: dict[str, int] = {}
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._reading: OrderedDict[socket.socket, None] = OrderedDict()  # oldest first
        super().__init__(address, handler)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        host = str(client_address[0]) if isinstance(client_address, tuple) and client_address else ""
        with self._lock:
            busy = self._per_client.get(host, 0) >= self.max_per_client
            if busy:
                # its oldest connection that has not sent its request makes room, as below
                own = next((r for r in self._reading if self._clients.get(r) == host), None)
                if own is not None:
                    del self._reading[own]
                    _shutdown(own)
                    busy = False
            if not busy:
                self._per_client[host] = self._per_client.get(host, 0) + 1
                self._clients[request] = host
        if busy:  # this client's connections are all being answered: it holds its share
            log.debug("connection from %s refused: %d of its connections open", client_address, self.max_per_client)
            self.shutdown_request(request)
            return
        if not self._slots.acquire(blocking=False):
            if not (self._close_oldest_reading() and self._slots.acquire(timeout=_SLOT_WAIT_S)):
                log.debug("connection from %s refused: %d connections being answered",
                          client_address, self.max_connections)
                self._forget_client(request)
                self.shutdown_request(request)
                return
        with self._lock:
            self._reading[request] = None
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def request_read(self, request: socket.socket) -> None:
        with self._lock:
            self._reading.pop(request, None)

    def _done(self, request: socket.socket) -> None:
        with self._lock:
            self._reading.pop(request, None)
        self._forget_client(request)
        self._slots.release()

    def _forget_client(self, request: socket.socket) -> None:
        with self._lock:
            host = self._clients.pop(request, None)
            if host is not None:
                left = self._per_client[host] - 1
                if left:
                    self._per_client[host] = left
                else:
                    del self._per_client[host]

    def _close_oldest_reading(self) -> bool:
        with self._lock:
            if not self._reading:
                return False
            oldest, _ = self._reading.popitem(last=False)
            _shutdown(oldest)  # its thread's read returns at once; the thread ends and frees a slot
        return True

    def server_close(self) -> None:
        super().server_close()
        with self._lock:
            for request in self._reading:
                _shutdown(request)
            self._reading.clear()

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # a read timeout, a reset, a connection closed for room
            log.debug("connection from %s: %s", client_address, exc)
            return
        log.warning("error answering %s", client_address, exc_info=True)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already gone


def _bind(host: str, port: int, app: object, *, max_connections: int, read_timeout_s: float,
          listen: str, tls: ssl.SSLContext | None = None) -> _BoundedServer:
    try:
        family, addr = _get_best_family(host, port)  # what start_http_server uses

        class Server(_BoundedServer):
            address_family = family

        class Handler(_Handler):
            timeout = read_timeout_s

        server = Server((addr, port), Handler, max_connections=max_connections)
    except OSError as exc:  # taken port, address not on this host, unknown host name
        raise InputError(f"--listen {listen}: cannot listen ({exc.strerror or exc})") from None
    if tls is not None:
        # as start_http_server(certfile=..., keyfile=...) does, the handshake deferred (_Handler.setup)
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    server.set_app(app)  # type: ignore[arg-type]
    return server


class MetricsServer:
    """A running ``/metrics`` server. ``port`` is the bound port (useful with port 0)."""

    def __init__(self, registry: CollectorRegistry, listen: str = DEFAULT_LISTEN, *,
                 max_connections: int = MAX_CONNECTIONS, read_timeout_s: float = READ_TIMEOUT_S,
                 web_config: WebConfig | None = None, allowed_hosts: Sequence[str] = ()) -> None:
        host, port = parse_listen(listen)
        app = make_wsgi_app(registry)
        tls = None
        if web_config is not None:
            app = basic_auth(app, web_config.basic_auth_users)
            tls = tls_context(web_config) if web_config.tls else None
        if web_config is None or not web_config.basic_auth_users:
            # no password: the Host is checked, so a DNS-rebinding page cannot read the chips'
            # serials and findings through a browser on this host
            app = host_check(app, (*own_names(host), *allowed_hosts))
        self.scheme = "https" if tls is not None else "http"
        self.httpd = _bind(host, port, app, max_connections=max_connections,
                           read_timeout_s=read_timeout_s, listen=listen, tls=tls)
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="soak-metrics", daemon=True)

    @property
    def url(self) -> str:
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return (f"{self.scheme}://[{host}]:{self.port}/metrics" if ":" in host
                else f"{self.scheme}://{host}:{self.port}/metrics")

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(registry: CollectorRegistry, listen: str = DEFAULT_LISTEN, *, web_config: WebConfig | None = None,
          allowed_hosts: Sequence[str] = (), **limits: float) -> MetricsServer:
    """Start serving ``registry`` on ``listen`` (HOST:PORT) in a background thread.

    ``limits``: ``max_connections``, ``read_timeout_s`` (defaults: this module's constants);
    ``web_config``: TLS and basic auth (:mod:`exporters.webconfig`).
    """
    return MetricsServer(registry, listen, web_config=web_config, allowed_hosts=allowed_hosts,
                         **limits).start()  # type: ignore[arg-type]


def check_listen(listen: str) -> None:
    """Raise the one-line InputError :func:`serve` would raise if ``listen`` cannot be bound now."""
    host, port = parse_listen(listen)
    if port == 0:
        return
    _bind(host, port, None, max_connections=1, read_timeout_s=READ_TIMEOUT_S, listen=listen).server_close()
