"""Operator API keys (admin only): create, list, revoke."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter

from phalanx.store import keys
from phalanx_api import actions
from phalanx_api.deps import AdminDep, SessionDep
from phalanx_api.paths import API_PREFIX
from phalanx_api.responses import NOT_FOUND, UNAUTHORIZED, documented
from phalanx_api.schemas import CreatedKeyOut, KeyIn, KeyList, KeyOut
from phalanx_api.transactions import writing

router = APIRouter(prefix=f"{API_PREFIX}/keys", tags=["keys"])


@router.post("", status_code=201, responses=UNAUTHORIZED)
def create_key(body: KeyIn, db: SessionDep, user: AdminDep) -> CreatedKeyOut:
    """Create an operator key; its secret is in this answer only."""
    with writing(db):
        created = actions.create_key(db, name=body.name, role=body.role, actor=user)
    return CreatedKeyOut(**KeyOut.model_validate(created.key).model_dump(), secret=created.secret)


@router.get("", responses=UNAUTHORIZED)
def list_keys(db: SessionDep, _: AdminDep, include_revoked: bool = False) -> KeyList:
    """List operator keys, oldest first (never their secrets), as ``{"items": [...]}``."""
    found = keys.list_keys(db, include_revoked=include_revoked)
    return KeyList(items=[KeyOut.model_validate(key) for key in found])


@router.post("/{key_id}/revoke", responses=documented(UNAUTHORIZED, NOT_FOUND))
def revoke_key(key_id: UUID, db: SessionDep, user: AdminDep) -> KeyOut:
    """Revoke a key at once; its dashboard sessions end too."""
    with writing(db):
        key = actions.revoke_key(db, str(key_id), actor=user)
    return KeyOut.model_validate(key)
