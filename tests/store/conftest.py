"""One store fixture, parametrised over every backend the contract suite must pass on."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from soak.store import Store
from tests.conftest import skip_unless_ci

PG_URL = os.environ.get("SOAK_TEST_PG_URL")


def _pg_schema_url(base: str) -> tuple[str, str]:
    """A throwaway PostgreSQL schema per test, so parallel tests never see each other's rows."""
    schema = f"soak_t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in base else "?"
    return schema, f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(params=["sqlite_file", "sqlite_memory", pytest.param("postgresql", marks=pytest.mark.pg)])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    kind = request.param
    if kind == "sqlite_file":
        yield f"sqlite:///{tmp_path / 'soak.db'}"
    elif kind == "sqlite_memory":
        yield "sqlite://"
    else:
        if not PG_URL:
            skip_unless_ci("SOAK_TEST_PG_URL is not set")
        from sqlalchemy import create_engine, text

        schema, url = _pg_schema_url(PG_URL)
        admin = create_engine(PG_URL)
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        try:
            yield url
        finally:
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store.open(store_url)
    try:
        yield s
    finally:
        s.close()
