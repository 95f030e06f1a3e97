"""Basic auth of ``/metrics`` under a flood of wrong passwords (was: every wrong password ran
bcrypt in one of the 32 connection slots, so 40 threads of them let 3 of 7 good scrapes through;
a password over 72 bytes was a 500 with a traceback for a real user and 401 for an unknown one;
the unknown user's check had a fixed cost 10 whatever the users' cost)."""

from __future__ import annotations

import base64
import http.client
import logging
import time

import pytest
from prometheus_client import CollectorRegistry, Gauge

from exporters import webconfig
from exporters.server import serve
from exporters.webconfig import WebConfig

FLOOD_THREADS = 40
FLOOD_S = 10.0


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


# Another process floods the port with wrong passwords from 40 threads, as the attacker
# did; it prints how its requests were answered.
_FLOOD = r"""
import base64, http.client, json, sys, threading, time
port, threads, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
counts, lock, end = {}, threading.Lock(), time.monotonic() + seconds
def wrong(i):
    n = 0
    while time.monotonic() < end:
        n += 1
        auth = "Basic " + base64.b64encode(b"prometheus:guess-%d-%d" % (i, n)).decode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=("127.0.0.2", 0))
        try:
            conn.request("GET", "/metrics", headers={"Authorization": auth})
            status = str(conn.getresponse().status)
        except OSError:
            status = "refused"
        finally:
            conn.close()
        with lock:
            counts[status] = counts.get(status, 0) + 1
ts = [threading.Thread(target=wrong, args=(i,)) for i in range(threads)]
for t in ts:
    t.start()
print("flooding", flush=True)
for t in ts:
    t.join()
print(json.dumps(counts), flush=True)
"""


@pytest.mark.slow
@pytest.mark.alone  # 40 threads of flood and a timed scrape: the CPU's, one test at a time
def test_a_flood_of_wrong_passwords_does_not_starve_good_scrapes() -> None:
    import json
    import subprocess
    import sys

    registry = CollectorRegistry()
    Gauge("soak_test_value", "a value", registry=registry).set(7)
    cfg = WebConfig("web.yml", basic_auth_users={"prometheus": _hash(b"s3cret", 10)})
    server = serve(registry, "127.0.0.1:0", web_config=cfg)
    flood = subprocess.Popen([sys.executable, "-c", _FLOOD, str(server.port), str(FLOOD_THREADS), str(FLOOD_S)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert flood.stdout.readline() == "flooding\n"
        good, tries, missed = 0, 0, []
        end = time.monotonic() + FLOOD_S - 1
        while time.monotonic() < end:
            tries += 1
            start = time.monotonic()
            try:  # Prometheus' default scrape timeout is 10 s; a good scrape must answer well within it
                status: int | str = _get(server.port, _basic("prometheus", "s3cret"), timeout=5.0)
            except OSError as exc:
                status = repr(exc)
            good += status == 200
            if status != 200:
                missed.append(f"{status} after {time.monotonic() - start:.1f} s")
            time.sleep(0.5)
        answers = json.loads(flood.communicate(timeout=30)[0])
        print(f"good scrapes {good} of {tries}; flood answers {answers}")
        assert tries >= 5
        assert good == tries, f"{good} of {tries} good scrapes got through ({missed}); flood answers {answers}"
        assert answers.get("429", 0) > answers.get("401", 0)  # the flood was answered without bcrypt
    finally:
        flood.kill()
        flood.wait(10)
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


def test_the_unknown_users_check_is_a_hash_of_the_users_cost() -> None:
    auth = webconfig.BasicAuth({"prometheus": _hash(b"s3cret", 5), "grafana": _hash(b"x", 6)})
    assert auth._dummy.startswith(b"$2b$06$")  # the users' (highest) cost, not a fixed 10


@pytest.mark.alone  # compares two timings
def test_the_unknown_users_check_costs_what_a_users_does() -> None:
    import bcrypt

    users = {"prometheus": _hash(b"s3cret", 12)}
    auth = webconfig.BasicAuth(users)

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
