"""Migrations refuse what Alembic would fail on in its own words: no file, no such revision."""

from __future__ import annotations

import pytest

from phalanx.store.migrate import check_revision, revision_ids, upgrade


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_database_is_refused_for_it_would_be_gone_with_the_migration(
    url: str,
) -> None:
    with pytest.raises(ValueError, match="in-memory SQLite database, gone with each connection"):
        upgrade(url)


@pytest.mark.parametrize("revision", ["", "head+1", "head-1", "zzz", "base"])
def test_a_revision_that_is_neither_head_nor_a_migration_is_refused_naming_them(
    revision: str,
) -> None:
    with pytest.raises(ValueError) as refused:
        check_revision(revision)
    assert str(refused.value).startswith(f"no revision {revision!r}: give head or one of 0001, ")


def test_head_and_every_migration_are_revisions() -> None:
    ids = revision_ids()
    assert ids[0] == "0001" and len(ids) == len(set(ids))
    for revision in ("head", *ids):
        assert check_revision(revision) == revision
