"""A throwaway PostgreSQL database on a test server: made for a cluster test or a benchmark,
dropped afterwards (the tests' ``db_url`` fixture and ``benchmarks/`` share it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fresh_database(pg_url: str, prefix: str = "soak_test") -> Iterator[str]:
    """The URL of a new database on the server of ``pg_url``, dropped (connections and all)
    when the block ends."""
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    base, _, _ = pg_url.rpartition("/")
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield f"{base}/{name}"
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
