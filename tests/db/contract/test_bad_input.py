"""Misuse gets a clear error naming the query, parameter or client, the same on both backends."""

from __future__ import annotations

import pytest

from sim.db.base import Backend, Blocked
from sim.db.errors import ClientStateError, ParameterError, UnknownQueryError


def test_backend_follows_the_protocol(backend):
    assert isinstance(backend, Backend)


def test_unknown_query_suggests_the_closest(db):
    with pytest.raises(
        UnknownQueryError,
        match="unknown query 'claim_conditonal'; did you mean 'claim_conditional'",
    ):
        db.run("A", "claim_conditonal", id=1)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"id": 1, "owner": "A", "now": 1.0}, "parameter 'lease_until' missing"),
        (
            {"id": "1", "owner": "A", "now": 1.0, "lease_until": 2.0},
            "parameter 'id' expects int, got str",
        ),
        (
            {"id": True, "owner": "A", "now": 1.0, "lease_until": 2.0},
            "parameter 'id' expects int, got bool",
        ),
        (
            {"id": 1, "owner": None, "now": 1.0, "lease_until": 2.0},
            "parameter 'owner' expects text",
        ),
        ({"id": 1, "owner": "A", "now": "1", "lease_until": 2.0}, "parameter 'now' expects time"),
        (
            {"id": 1, "owner": "A", "now": 1, "lease_until": 2, "ttl": 3},
            "parameter 'ttl' is not a parameter",
        ),
    ],
)
def test_bad_parameters(db, params, message):
    with pytest.raises(ParameterError, match=f"query claim_conditional: {message}"):
        db.run("A", "claim_conditional", **params)
    assert not db.in_transaction("A")


def test_transaction_control_out_of_order(db):
    with pytest.raises(ClientStateError, match="not connected"):
        db.backend.execute("nobody", "dump_jobs", {})
    with pytest.raises(ClientStateError, match="already connected"):
        db.connect("A")
    with pytest.raises(ClientStateError, match="no transaction to commit"):
        db.commit("A")
    db.rollback("A")  # rolling back outside a transaction is a no-op, as in PostgreSQL
    db.begin("A")
    with pytest.raises(ClientStateError, match="already in a transaction"):
        db.begin("A")
    with pytest.raises(ClientStateError, match="no blocked statement"):
        db.resume("A")
    db.rollback("A")


def test_a_blocked_client_must_resume_first(db):
    db.add_jobs(1)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    assert db.claim("B", 1, now=1.0, until=31.0) == Blocked("B", "claim_conditional", "A")
    with pytest.raises(ClientStateError, match="client B still has a blocked"):
        db.run("B", "dump_jobs")
    db.rollback("A")
    assert db.resume("B") == [(1, 1)]
