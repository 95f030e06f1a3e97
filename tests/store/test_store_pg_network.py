"""PostgreSQL connections of the store give up on a network that went silent (a cut link)
instead of blocking the agent's loop for TCP's retransmission time."""

from __future__ import annotations

import pytest

from soak.store import Store
from soak.store.repo import PG_CALL_BOUND_S


def _dsn(url: str) -> dict[str, str]:
    with Store.open(url) as store, store.engine.connect() as conn:
        return dict(p.split("=", 1) for p in conn.connection.dbapi_connection.info.dsn.split())


@pytest.mark.parametrize("store_url", [pytest.param("postgresql", marks=pytest.mark.pg)], indirect=True)
def test_a_cut_link_ends_a_store_call_within_the_bound_unless_the_url_sets_its_own(store_url: str) -> None:
    dsn = _dsn(store_url)
    assert dsn["tcp_user_timeout"] == str(PG_CALL_BOUND_S * 1000)
    assert (dsn["keepalives"], dsn["connect_timeout"]) == ("1", "10")
    # idle connections: keep-alives notice a silent peer within the same bound
    assert int(dsn["keepalives_idle"]) + int(dsn["keepalives_interval"]) * int(dsn["keepalives_count"]) \
        <= PG_CALL_BOUND_S
    own = _dsn(f"{store_url}&tcp_user_timeout=60000&keepalives_idle=30")
    assert (own["tcp_user_timeout"], own["keepalives_idle"]) == ("60000", "30")
