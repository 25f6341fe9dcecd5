"""Red team: config files that ``phalanx run`` must refuse in one line, exit 2, naming the file.

A config nested deeper than Python's recursion limit (``[[[[...`` in JSON, ``x = [[[...`` in
TOML, a few hundred kilobytes) made the parser raise ``RecursionError``, which the CLI
reported as ``error: RecursionError: maximum recursion depth exceeded ...``: exit status 1
(as for a run that failed) and no file named. The other cases held before and stay here as
attacks: a binary file, a file that is a directory, a missing file, a JSON list and bad TOML
must all end in one ``error: FILE: ...`` line with status 2 and no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx_cli.main import app

DEPTH = 100_000


def _write(tmp_path: Path, name: str, content: bytes | None) -> Path:
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return path


CASES = {
    "deep.json": b"[" * DEPTH + b"]" * DEPTH,
    "deep.toml": b"x = " + b"[" * DEPTH + b"]" * DEPTH + b"\n",
    "deep-table.json": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "binary.toml": bytes(range(256)),
    "directory.toml": None,
    "list.json": b"[1, 2]",
    "bad.toml": b"[data\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_config_file_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHALANX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PHALANX_DEBUG", raising=False)
    path = _write(tmp_path, name, CASES[name])
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: ")
    assert "RecursionError" not in line and "Traceback" not in result.output
    assert not (tmp_path / "data").exists()  # nothing was recorded
