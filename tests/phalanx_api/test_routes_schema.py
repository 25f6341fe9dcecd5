"""Property-based tests over the OpenAPI schema (schemathesis).

Every operation is called with generated valid and invalid input (schemathesis's
coverage phase: boundaries and violations of each constraint; then bounded fuzzing),
as an admin so that the handlers run, not just the authorization check. Whatever the
input: no 5xx, and every answer is documented (status, content type, body schema).

The schema comes from an app that never touches its database; each test calls the
module's app, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import Keys

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]

_schema_app = create_app(ApiSettings(database_url="sqlite://", secret_key="schema-only"))
schema = schemathesis.openapi.from_asgi("/openapi.json", _schema_app)


@pytest.fixture(scope="module")
def asgi_session(app: FastAPI) -> Iterator[asgi.ASGIClient]:
    """One in-process HTTP session on the module's app, reused by every generated call."""
    with asgi.get_client(app) as session:  # type: ignore[arg-type]
        yield session


@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented_and_none_is_a_server_error(
    case: Any, asgi_session: asgi.ASGIClient, api_keys: Keys
) -> None:
    case.call_and_validate(session=asgi_session, headers=api_keys.headers("admin"), checks=CHECKS)
