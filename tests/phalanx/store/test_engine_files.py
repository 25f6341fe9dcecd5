"""A database path that is not an SQLite database is refused before it is read or advised on."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from phalanx.store import make_engine
from phalanx.store.engine import NotADatabaseError


def test_a_file_that_is_not_a_database_is_refused_without_advice_on_its_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    passwd.chmod(0o644)
    with caplog.at_level(logging.WARNING), pytest.raises(NotADatabaseError) as refused:
        make_engine(f"sqlite:///{passwd}")
    assert str(refused.value) == f"the database file {passwd} is not an SQLite database"
    assert "chmod" not in caplog.text  # no advice to make someone else's file ours
    assert passwd.read_text() == "root:x:0:0:root:/root:/bin/bash\n"


def test_a_directory_is_refused_as_no_regular_file(tmp_path: Path) -> None:
    with pytest.raises(NotADatabaseError, match="is not a regular file"):
        make_engine(f"sqlite:///{tmp_path}")


def test_an_sqlite_database_or_an_empty_file_is_taken(tmp_path: Path) -> None:
    existing = tmp_path / "old.db"
    sqlite3.connect(existing).execute("CREATE TABLE t (x)").connection.close()
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (existing, empty):
        make_engine(f"sqlite:///{path}").dispose()
