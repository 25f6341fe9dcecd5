"""`phalanx serve`: a port outside 1-65535 is refused before anything starts."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from phalanx.settings import Settings
from phalanx_cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_a_port_no_socket_can_have_is_a_usage_error(port: str) -> None:
    # uvicorn bound 70000 modulo 65536 (4464) while announcing 70000.
    result = runner.invoke(app, ["serve", "--port", port])
    assert result.exit_code == 2
    assert "--port" in result.output and "Phalanx API on" not in result.output


def test_a_port_setting_no_socket_can_have_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHALANX_API_PORT", "99999")
    with pytest.raises(ValueError, match="api_port"):
        Settings()
