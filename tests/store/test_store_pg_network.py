"""PostgreSQL connections of the store give up on a network that went silent (a cut link)
instead of blocking the agent's loop for TCP's retransmission time (about 15 minutes).

The store's client runs in a network namespace of its own, joined to this one by a veth pair;
PostgreSQL listens on loopback here, so a relay on this end of the pair carries it. Bringing
this end down cuts the link the way a failed NIC or switch port does: the client's packets go
out and nothing comes back, no reset, no error.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from soak.store.engine import PG_CALL_BOUND_S
from tests.conftest import skip_unless_ci

pytestmark = [pytest.mark.slow, pytest.mark.pg]

# The URL's own libpq option in the second store: a bound well under the store's own, so the
# call ending after it (and not after PG_CALL_BOUND_S) shows the URL's option won.
OWN_BOUND_S = max(1, PG_CALL_BOUND_S // 7)
SLACK_S = 5.0  # a loaded machine: thread start, Python, the error's way up through SQLAlchemy

# Runs in the namespace: opens both stores while the link is up, writes a run each, says
# "ready", waits for the cut, then makes one store call on each at once and reports each
# call's time and error.
CLIENT = """
import json, sys, threading, time
from soak.errors import StoreError
from soak.store import Store

stores = {name: Store.open(url) for name, url in zip(("default", "own"), sys.argv[1:])}
for name, store in stores.items():
    store.create_run(name, host="node-a01", plan={}, started_ts=1.0)
print("ready", flush=True)
sys.stdin.readline()
lock = threading.Lock()

def call(name, store):
    t0 = time.monotonic()
    try:
        store.add_event(name, "start", ts=2.0, message="over a cut link")
        error = None
    except StoreError as exc:
        error = str(exc)
    with lock:  # one line each, even when both calls end at once
        print(json.dumps({"store": name, "s": time.monotonic() - t0, "error": error}), flush=True)

threads = [threading.Thread(target=call, args=item) for item in stores.items()]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@dataclass(frozen=True)
class Link:
    ns: str  # the client's namespace
    root_if: str  # the pair's end in this namespace, brought down to cut the link
    root_addr: str


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def link() -> Iterator[Link]:
    """A namespace with a veth pair to this one, removed afterwards."""
    if os.geteuid() != 0:
        skip_unless_ci("cutting a link needs root (ip netns, veth)")
    for tool in ("ip", "socat"):
        if shutil.which(tool) is None:
            skip_unless_ci(f"{tool} is not installed (iproute2, socat)")
    tag = uuid.uuid4().hex[:6]
    net = random.randrange(1, 254)
    ns, root_if, ns_if = f"soak-pg-{tag}", f"spr{tag}", f"spn{tag}"
    root_addr, ns_addr = f"10.214.{net}.1", f"10.214.{net}.2"
    made = _ip("netns", "add", ns)
    if made.returncode != 0:
        skip_unless_ci(f"ip netns add is not permitted here: {made.stderr.strip()}")
    try:
        for cmd in (["link", "add", root_if, "type", "veth", "peer", "name", ns_if],
                    ["link", "set", ns_if, "netns", ns],
                    ["addr", "add", f"{root_addr}/30", "dev", root_if],
                    ["link", "set", root_if, "up"],
                    ["-n", ns, "addr", "add", f"{ns_addr}/30", "dev", ns_if],
                    ["-n", ns, "link", "set", ns_if, "up"],
                    ["-n", ns, "link", "set", "lo", "up"]):
            r = _ip(*cmd)
            if r.returncode != 0:
                skip_unless_ci(f"ip {' '.join(cmd)}: {r.stderr.strip()}")
        yield Link(ns, root_if, root_addr)
    finally:
        _ip("link", "del", root_if)  # takes its peer with it
        _ip("netns", "del", ns)


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.parametrize("store_url", [pytest.param("postgresql", marks=pytest.mark.pg)], indirect=True)
def test_a_cut_link_ends_a_store_call_within_the_bound_unless_the_url_sets_its_own(store_url: str,
                                                                                   link: Link) -> None:
    from sqlalchemy.engine import make_url

    pg = make_url(store_url)
    port = _free_port(link.root_addr)
    relay = subprocess.Popen(["socat", f"TCP-LISTEN:{port},bind={link.root_addr},reuseaddr,fork",
                              f"TCP:{pg.host or '127.0.0.1'}:{pg.port or 5432}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while True:  # the relay listens before the client's one connect
        try:
            socket.create_connection((link.root_addr, port), timeout=1).close()
            break
        except OSError:
            assert relay.poll() is None and time.monotonic() < deadline, "socat did not start"
            time.sleep(0.05)
    over_link = pg.set(host=link.root_addr, port=port)
    default_url = over_link.render_as_string(hide_password=False)
    own_url = over_link.update_query_dict({"tcp_user_timeout": str(OWN_BOUND_S * 1000)}).render_as_string(
        hide_password=False)
    client = subprocess.Popen(["ip", "netns", "exec", link.ns, sys.executable, "-c", CLIENT, default_url, own_url],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        ready = client.stdout.readline()
        if ready != "ready\n":
            _stop(client)
            pytest.fail(f"the client did not start: {ready!r} {client.stderr.read()[-2000:]}")
        r = _ip("link", "set", link.root_if, "down")
        assert r.returncode == 0, r.stderr
        client.stdin.write("cut\n")
        client.stdin.flush()
        try:
            out, err = client.communicate(timeout=PG_CALL_BOUND_S + 2 * SLACK_S)
        except subprocess.TimeoutExpired:
            _stop(client)
            out, err = client.communicate()
            pytest.fail(f"a store call over the cut link still blocked after {PG_CALL_BOUND_S + 2 * SLACK_S:g} s "
                        f"(the bound is {PG_CALL_BOUND_S} s); finished: {out!r}")
    finally:
        _stop(client)
        _stop(relay)
    calls = {c["store"]: c for c in map(json.loads, out.splitlines())}
    assert set(calls) == {"default", "own"}, f"{out!r} {err[-2000:]!r}"
    for name, call in calls.items():
        error = call["error"]
        assert error and "\n" not in error and error.startswith("store "), (name, call)
    # the store's own bound: the call waits it out (the link is silent) and no longer
    assert PG_CALL_BOUND_S - 1 <= calls["default"]["s"] <= PG_CALL_BOUND_S + SLACK_S, calls
    # the URL's tcp_user_timeout wins over the store's
    assert OWN_BOUND_S - 0.5 <= calls["own"]["s"] <= OWN_BOUND_S + SLACK_S < PG_CALL_BOUND_S - 1, calls
