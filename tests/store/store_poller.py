"""A reader that polls stores while others create them, as ``soak runs`` or the app would.

Run in its own process (``multiprocessing``): it opens every store matching a glob (or the
one store a URL names) with ``create=False`` about once a millisecond, and records every
statement it sends that would change a database, which a reader must never do.
"""

from __future__ import annotations

import glob
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from soak.store import Store

WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "ALTER", "DROP")
NOT_YET = "no soak schema yet (being created, or not a soak database)"  # a reader's refusal


@dataclass
class PollResult:
    writes: list[str] = field(default_factory=list)  # statements the reader sent that change a database
    refusals: list[str] = field(default_factory=list)  # one-line errors of an open (store not ready yet)
    complete: list[str] = field(default_factory=list)  # stores the reader found whole, in that order


def _targets(pattern: str) -> list[str]:
    return [pattern] if "://" in pattern else sorted(glob.glob(pattern))


def poll(pattern: str, polling: Any, stop: Any, results: Any, interval_s: float = 0.001) -> None:
    """Poll until ``stop`` is set, then once more: every store must then open whole.

    ``polling`` is set after the first pass: start the creators then, not before.
    """
    out = PollResult()

    @event.listens_for(Engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.lstrip().split(" ", 1)[0].upper() in WRITE_VERBS:
            out.writes.append(" ".join(statement.split())[:120])

    def try_open(path: str) -> None:
        try:
            with Store.open(path, create=False) as store:
                store.list_runs()  # a whole store has its tables, not only the version row
            out.complete.append(path)
        except Exception as exc:  # a StoreError is expected; anything else is recorded as found
            out.refusals.append(f"{type(exc).__name__}: {str(exc).replace(path, 'STORE')}")

    while not stop.is_set():
        for path in _targets(pattern):
            if path not in out.complete:
                try_open(path)
        polling.set()
        time.sleep(interval_s)
    for path in _targets(pattern):
        if path not in out.complete:
            try_open(path)
    results.put(out)


def race(pattern: str, racer: Callable[..., None], args: Sequence[tuple[Any, ...]],
         timeout_s: float = 120.0) -> tuple[list[Any], PollResult]:
    """Poll ``pattern`` while one forked process per ``args`` runs ``racer(*a, go, results)``.

    The racers wait for ``go``, set once the reader polls, so they start together (soak is
    imported once, before the fork); each puts one outcome on ``results``. Returns the
    outcomes and what the reader saw; every process is ended, whatever happens.
    """
    ctx = multiprocessing.get_context("fork")
    go, polling, stop, polled, outcomes = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=poll, args=(pattern, polling, stop, polled))
    racers = [ctx.Process(target=racer, args=(*a, go, outcomes)) for a in args]
    for p in (reader, *racers):
        p.start()
    try:
        assert polling.wait(30), "the reader did not start polling"
        go.set()
        got = [outcomes.get(timeout=timeout_s) for _ in racers]
        stop.set()
        return got, polled.get(timeout=60)
    finally:
        for p in (reader, *racers):
            p.join(10)
            if p.is_alive():
                p.kill()
