"""``python -m phalanx_cli``: the ``phalanx`` command."""

from phalanx_cli.main import app

app(prog_name="phalanx")
