"""Red team of the per-address budget of registrations waiting for their proof.

One host holds a whole IPv6 /64, and an IPv4 client may reach a dual-stack server as
an IPv4-mapped IPv6 address: neither gives it a second budget. A header naming
another address changes nothing (only uvicorn, trusting a proxy, may take the peer
from it). A refused registration leaves no row behind.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from phalanx import identity
from phalanx.store.models import Client
from phalanx_api.paths import API_PREFIX
from phalanx_api.settings import ApiSettings
from tests.support.factories import FakeClock, TestClient, limited_app, public_key_text, unique_name

CLIENTS = f"{API_PREFIX}/clients"
BUDGET = 3


def _body() -> dict[str, str]:
    key = identity.generate_private_key("P-256")
    return {"name": unique_name(), "public_key": public_key_text(key, "pem")}


def _rows(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Client)) or 0)


@pytest.mark.parametrize(
    "peers",
    [
        ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff:ffff:ffff:ffff"],
        ["192.0.2.7", "::ffff:192.0.2.7", "::ffff:c000:207"],
    ],
    ids=["one-ipv6-64", "ipv4-and-its-mapped-forms"],
)
def test_an_address_s_other_spellings_share_its_waiting_budget_and_a_refusal_leaves_no_row(
    peers: list[str], fresh_settings: ApiSettings, fresh_sessions: sessionmaker[Session]
) -> None:
    app = limited_app(fresh_settings, FakeClock(), pending_per_address=BUDGET)
    before = _rows(fresh_sessions)
    statuses = []
    for i in range(2 * BUDGET):
        peer = (peers[i % len(peers)], 40000 + i)
        with TestClient(app, client=peer) as caller:
            headers = {"X-Forwarded-For": f"198.51.100.{i}"}  # not trusted: no new address
            statuses.append(caller.post(CLIENTS, json=_body(), headers=headers).status_code)
    assert statuses == [201] * BUDGET + [429] * BUDGET
    assert _rows(fresh_sessions) == before + BUDGET
