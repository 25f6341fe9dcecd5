"""``phalanx --help`` and every subcommand's: at once, and in plain words.

Heavy libraries are imported by the commands that use them, never to show help;
a fresh interpreter shows which modules each ``--help`` loaded (no clock is read).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from phalanx_cli.main import app

ROOT = Path(__file__).resolve().parents[2]

HEAVY = (
    "torch",
    "numpy",
    "flwr",
    "ray",
    "grpc",
    "sqlalchemy",
    "alembic",
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "httpx",
    "cryptography",
    "psutil",
)
"""Libraries that cost a second or more to import, together; no help needs one."""

PROBE = """
import json, sys
from phalanx_cli.main import app
heavy, commands = json.loads(sys.argv[1]), json.loads(sys.argv[2])
loaded = {}
for argv in commands:
    try:
        app(argv, prog_name="phalanx")
    except SystemExit:
        pass
    loaded[" ".join(argv)] = sorted(name for name in heavy if name in sys.modules)
print(json.dumps(loaded))
"""


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``command``, itself first."""
    paths = [path]
    if isinstance(command, click.Group):
        for name, subcommand in command.commands.items():
            paths += _commands(subcommand, (*path, name))
    return paths


ROOT_COMMAND = typer.main.get_command(app)
COMMANDS = [(path, ROOT_COMMAND) for path in _commands(ROOT_COMMAND)]


def _command(path: tuple[str, ...]) -> click.Command:
    command = ROOT_COMMAND
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def test_no_help_imports_a_heavy_library() -> None:
    helps = [[]] + [[*path, "--help"] for path, _ in COMMANDS]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), json.dumps(helps)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert len(loaded) == len(helps)
    assert {argv: names for argv, names in loaded.items() if names} == {}


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=" ".join)
def test_every_help_is_in_plain_words_and_every_parameter_is_described(
    path: tuple[str, ...],
) -> None:
    command = _command(path)
    texts = [command.help or ""]
    for param in command.params:
        help_text = getattr(param, "help", None)
        assert help_text, f"{param.name} of `phalanx {' '.join(path)}` has no help"
        if isinstance(param.type, click.Choice):  # the help says what it is, not the list again
            words = set(re.findall(r"[\w-]+", help_text.lower())) - {"or", "and"}
            assert not words <= {str(c).lower() for c in param.type.choices}, help_text
        texts.append(help_text)
    for text in texts:
        assert "``" not in text and ":class:" not in text and ":mod:" not in text, text


@pytest.mark.parametrize("path", [("run",), ("demo",), ("keys", "list"), ("client", "register")])
def test_format_is_a_choice_of_table_or_json(path: tuple[str, ...]) -> None:
    (output,) = [p for p in _command(path).params if p.name == "output"]
    assert isinstance(output.type, click.Choice)
    assert list(output.type.choices) == ["table", "json"]


def test_run_help_describes_its_config_argument() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    (line,) = [line for line in result.output.splitlines() if "[CONFIG]" in line and "│" in line]
    assert "The run config, a TOML or JSON file" in line


def test_serve_takes_uvicorns_log_levels_as_a_choice() -> None:
    (level,) = [p for p in _command(("serve",)).params if p.name == "log_level"]
    assert isinstance(level.type, click.Choice)
    assert list(level.type.choices) == ["critical", "error", "warning", "info", "debug", "trace"]
    result = CliRunner().invoke(app, ["serve", "--log-level", "loud"])
    assert result.exit_code == 2
    assert "'loud' is not one of" in result.output
