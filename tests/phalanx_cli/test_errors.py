"""A failed command: one line on stderr and a non-zero exit; a traceback only with --debug."""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from phalanx_cli import errors
from phalanx_cli.errors import DEBUG_ENV, RefusedError, ReportingGroup, cause
from phalanx_cli.main import app


class _Section(BaseModel):
    workers: int = Field(le=10)


def _app() -> typer.Typer:
    """A two-command app on the same group as ``phalanx``."""
    tool = typer.Typer(cls=ReportingGroup)

    @tool.callback()
    def main(
        debug: Annotated[bool, typer.Option("--debug", envvar=DEBUG_ENV)] = False,
    ) -> None:
        """Options."""

    @tool.command()
    def crash(kind: str = "bug") -> None:
        """Fail the way ``kind`` says."""
        if kind == "refused":
            raise RefusedError("npz:d.npz[y_train]: labels run 1..10 with no 0")
        if kind == "config":
            _Section.model_validate({"workers": 11.0})
        if kind == "interrupt":
            raise KeyboardInterrupt
        raise RuntimeError("database is locked\n[SQL: BEGIN IMMEDIATE]")

    @tool.command()
    def fine() -> None:
        """Succeed."""

    return tool


@pytest.mark.parametrize(
    ("kind", "status", "line"),
    [
        ("bug", 1, "error: RuntimeError: database is locked"),
        ("refused", 2, "error: npz:d.npz[y_train]: labels run 1..10 with no 0"),
        ("config", 2, "error: invalid config: workers: Input should be less than or equal to 10"),
        ("interrupt", 130, "interrupted"),
    ],
)
def test_an_escaping_exception_is_one_line_on_stderr(
    kind: str, status: int, line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C arms a watchdog that ends the process at its exit; not this test process.
    monkeypatch.setattr(errors, "_GUARDED", True)
    result = CliRunner().invoke(_app(), ["crash", "--kind", kind])
    assert result.exit_code == status
    assert result.stderr.splitlines() == [line]
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_debug_lets_the_exception_through_for_its_traceback() -> None:
    result = CliRunner().invoke(_app(), ["--debug", "crash"])
    assert type(result.exception) is RuntimeError
    assert "error:" not in result.output


def test_phalanx_debug_in_the_environment_does_the_same() -> None:
    result = CliRunner().invoke(_app(), ["crash"], env={DEBUG_ENV: "1"})
    assert type(result.exception) is RuntimeError


def test_usage_errors_keep_clicks_form() -> None:
    result = CliRunner().invoke(_app(), ["crash", "--nope"])
    assert result.exit_code == 2
    assert "No such option" in result.output and "error: " not in result.output


def test_phalanx_help_lists_the_debug_option() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "--debug" in result.output and "run" in result.output


def test_an_empty_message_is_named_by_its_type() -> None:
    assert cause(RuntimeError()) == "RuntimeError"
    assert cause(RefusedError("a\n\nb")) == "a"


def test_a_missing_module_of_the_server_extra_is_named_with_the_fix() -> None:
    missing = ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
    assert cause(missing) == (
        "this command needs Phalanx's server extra (module 'psycopg' is missing): "
        "pip install 'phalanx[server]'"
    )
    other = ModuleNotFoundError("No module named 'lab'", name="lab")
    assert cause(other) == "ModuleNotFoundError: No module named 'lab'"


def test_a_bad_setting_in_the_environment_is_named_as_its_variable_without_its_value() -> None:
    result = CliRunner().invoke(app, ["serve"], env={"PHALANX_API_PORT": "abc"})
    assert result.exit_code == 2
    assert result.stderr == (
        "error: invalid setting: PHALANX_API_PORT: Input should be a valid integer, "
        "unable to parse string as an integer\n"
    )


def test_a_list_setting_is_named_as_its_variable_whatever_item_is_wrong() -> None:
    result = CliRunner().invoke(app, ["serve"], env={"PHALANX_ATTACK_PLUGINS": "not json"})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid setting: PHALANX_ATTACK_PLUGINS: ")
    assert len(result.stderr.splitlines()) == 1
