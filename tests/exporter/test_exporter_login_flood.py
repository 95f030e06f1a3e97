"""Basic auth of ``/metrics`` under a flood of wrong passwords (was: every wrong password ran
bcrypt in one of the 32 connection slots, so 40 threads of them let 3 of 7 good scrapes through;
a password over 72 bytes was a 500 with a traceback for a real user and 401 for an unknown one;
the unknown user's check had a fixed cost 10 whatever the users' cost)."""

from __future__ import annotations

import base64
import http.client
import logging
import os
import threading
import time

import pytest
from prometheus_client import CollectorRegistry, Gauge

from exporters import webconfig
from exporters.server import serve
from exporters.webconfig import WebConfig

FLOOD_THREADS = 40
FLOOD_S = float(os.environ.get("SOAK_LOGIN_FLOOD_S", "8"))


def _hash(password: bytes, rounds: int) -> str:
    import bcrypt

    return bcrypt.hashpw(password, bcrypt.gensalt(rounds=rounds)).decode().replace("$2b$", "$2y$", 1)


def _basic(user: str, password: str | bytes) -> str:
    raw = password if isinstance(password, bytes) else password.encode()
    return "Basic " + base64.b64encode(user.encode() + b":" + raw).decode()


def _get(port: int, header: str, source: str = "127.0.0.1", timeout: float = 5.0) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request("GET", "/metrics", headers={"Authorization": header})
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_flood_of_wrong_passwords_does_not_starve_good_scrapes() -> None:
    registry = CollectorRegistry()
    Gauge("soak_test_value", "a value", registry=registry).set(7)
    cfg = WebConfig("web.yml", basic_auth_users={"prometheus": _hash(b"s3cret", 10)})
    server = serve(registry, "127.0.0.1:0", web_config=cfg)
    stop = threading.Event()
    flood: dict[int | str, int] = {}
    lock = threading.Lock()

    def wrong(i: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:  # another client than the scraper: 127.0.0.2 is loopback too
                status: int | str = _get(server.port, _basic("prometheus", f"guess-{i}-{n}"), "127.0.0.2")
            except OSError:
                status = "refused"
            with lock:
                flood[status] = flood.get(status, 0) + 1

    try:
        threads = [threading.Thread(target=wrong, args=(i,), daemon=True) for i in range(FLOOD_THREADS)]
        for t in threads:
            t.start()
        good, tries = 0, 0
        end = time.monotonic() + FLOOD_S
        while time.monotonic() < end:
            tries += 1
            try:  # Prometheus' default scrape timeout is 10 s; a good scrape must answer well within it
                good += _get(server.port, _basic("prometheus", "s3cret"), timeout=5.0) == 200
            except OSError:
                pass
            time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(10)
        logging.getLogger(__name__).warning("good scrapes %d of %d; flood answers %s", good, tries, flood)
        print(f"good scrapes {good} of {tries}; flood answers {flood}")
        assert tries >= 5
        assert good == tries, f"{good} of {tries} good scrapes got through; flood answers {flood}"
        assert flood.get(429, 0) > flood.get(401, 0)  # the flood was answered without bcrypt
    finally:
        stop.set()
        server.stop()


def test_a_password_over_72_bytes_is_401_for_a_user_and_for_no_user(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    cfg = WebConfig("web.yml", basic_auth_users={"prometheus": _hash(b"s3cret", 4)})
    server = serve(registry, "127.0.0.1:0", web_config=cfg)
    try:
        with caplog.at_level(logging.DEBUG):
            assert _get(server.port, _basic("prometheus", "x" * 73)) == 401
            assert _get(server.port, _basic("nobody", "x" * 73)) == 401
            assert _get(server.port, _basic("prometheus", "s3cret")) == 200
        assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)
    finally:
        server.stop()


def test_the_unknown_users_check_costs_what_a_users_does() -> None:
    import bcrypt

    users = {"prometheus": _hash(b"s3cret", 12)}
    auth = webconfig.BasicAuth(users)
    assert auth._dummy.startswith(b"$2b$12$")  # the users' cost, not a fixed 10

    def seconds(user: str) -> float:
        start = time.perf_counter()
        assert auth.check(_basic(user, "wrong"), f"client-{user}-{time.perf_counter()}") == 401
        return time.perf_counter() - start

    known = min(seconds("prometheus") for _ in range(2))
    unknown = min(seconds("nobody") for _ in range(2))
    assert 0.6 < unknown / known < 1.6, (known, unknown)
    assert bcrypt.checkpw(b"s3cret", ("$2b$" + users["prometheus"][4:]).encode())


def test_failures_are_limited_per_client_and_a_verified_password_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    import bcrypt

    now = [0.0]
    auth = webconfig.BasicAuth({"prometheus": _hash(b"s3cret", 4)}, clock=lambda: now[0])
    calls = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda p, h: calls.append(p) or real(p, h))
    assert auth.check(_basic("prometheus", "s3cret"), "a") == 200
    assert [auth.check(_basic("prometheus", "s3cret"), "a") for _ in range(3)] == [200] * 3
    assert len(calls) == 1  # verified once, then cached
    answers = [auth.check(_basic("prometheus", f"w{i}"), "b") for i in range(webconfig.FAILURE_BURST + 3)]
    assert answers == [401] * webconfig.FAILURE_BURST + [429] * 3
    assert len(calls) == 1 + webconfig.FAILURE_BURST  # a limited client costs no bcrypt
    assert auth.check(_basic("prometheus", "s3cret"), "b") == 200  # its cached good password still passes
    assert auth.check(_basic("prometheus", "w"), "c") == 401  # another client is not limited
    now[0] += webconfig.FAILURE_REFILL_S
    assert auth.check(_basic("prometheus", "w"), "b") == 401  # one more try after the refill
    assert auth.check(_basic("prometheus", "w"), "b") == 429
