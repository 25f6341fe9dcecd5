"""A database path that is not an SQLite database is refused before it is read or advised on."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

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


def test_a_second_engine_on_a_database_leaves_the_locks_of_the_first_in_place(
    tmp_path: Path,
) -> None:
    # SQLite locks a database with POSIX locks, which a process drops all of when it
    # closes any descriptor of the file. Reading the header of a database this process
    # had open already let another process's last connection take the database for
    # unused, checkpoint it and delete its WAL: this process's connections then read
    # a stale snapshot for ever (a coordinator's rounds went unseen beside them).
    path = tmp_path / "phalanx.db"
    first = make_engine(f"sqlite:///{path}")
    with first.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    make_engine(f"sqlite:///{path}").dispose()  # another engine, as a migration's
    other_writer = (  # a write, a close, then a write left in the WAL
        "import os, sqlite3, sys\n"
        "for last in (False, True):\n"
        "    connection = sqlite3.connect(sys.argv[1])\n"
        "    connection.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "    connection.execute('INSERT INTO t VALUES (1)')\n"
        "    connection.commit()\n"
        "    if last:\n"
        "        os._exit(0)\n"
        "    connection.close()\n"
    )
    subprocess.run([sys.executable, "-c", other_writer, str(path)], check=True, timeout=120)
    with first.connect() as connection:
        seen = connection.execute(text("SELECT count(*) FROM t")).scalar_one()
    first.dispose()
    assert seen == 2
