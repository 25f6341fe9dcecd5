"""The audit log: who did what to whom, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator

from phalanx.store import audit
from phalanx_api.deps import SessionDep, ViewerDep
from phalanx_api.paths import API_PREFIX
from phalanx_api.responses import UNAUTHORIZED
from phalanx_api.routes.params import Before, Limit
from phalanx_api.schemas import DEFAULT_PAGE_SIZE, AuditOut, AuditPage, storable_text

router = APIRouter(prefix=f"{API_PREFIX}/audit", tags=["audit"])


def _text(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


Actor = Annotated[
    str | None, Query(max_length=200, description="e.g. a key's name"), AfterValidator(_text)
]
Action = Annotated[
    str | None, Query(max_length=100, description="e.g. client.ban"), AfterValidator(_text)
]
TargetType = Annotated[
    str | None, Query(max_length=50, description="client, run, event, key"), AfterValidator(_text)
]
TargetId = Annotated[str | None, Query(max_length=100), AfterValidator(_text)]


@router.get("", responses=UNAUTHORIZED)
def list_audit(
    db: SessionDep,
    _: ViewerDep,
    actor: Actor = None,
    action: Action = None,
    target_type: TargetType = None,
    target_id: TargetId = None,
    before: Before = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
) -> AuditPage:
    """List audit entries, newest first; page with ``before``."""
    rows = audit.list_audit(
        db,
        actor=actor,
        action=action,
        target_type=target_type,
        target_id=target_id,
        before=before,
        limit=limit + 1,
    )
    items = rows[:limit]
    return AuditPage(
        items=[AuditOut.model_validate(row) for row in items],
        next_before=items[-1].id if len(rows) > limit else None,
    )
