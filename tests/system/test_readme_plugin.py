"""The README's worked plug-in, run as written: loaded from the host, caught across rounds."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from phalanx.config import RunConfig
from phalanx.event_kinds import EventKind
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from tests.support.configs import small_config
from tests.support.inprocess import inprocess_transport
from tests.support.plugin_files import PluginFiles

README = Path(__file__).resolve().parents[2] / "README.md"


class Rounds:
    """Keeps the finished rounds (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def readme_block(language: str, first_line: str) -> str:
    """The README's fenced ``language`` block that starts with ``first_line``."""
    for block in re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.DOTALL):
        if block.startswith(first_line):
            return str(block)
    raise AssertionError(f"README has no {language} block starting {first_line!r}")


def test_the_readme_plugin_loads_and_its_colluders_are_proven_across_rounds(
    plugin_files: PluginFiles, allow_attack_plugins: Callable[..., None]
) -> None:
    (plugin_files.root / "lab").mkdir()
    (plugin_files.root / "lab" / "drift.py").write_text(readme_block("python", "# lab/drift.py"))
    plugin_files.modules += ["lab", "lab.drift"]
    allow_attack_plugins("lab.drift:Drift")
    attack = tomllib.loads(readme_block("toml", "# in the run config"))["attack"]
    config = small_config(
        rounds=3,
        assignment={"scheme": "bibd", "num_workers": 15, "r": 3},
        attack=attack,
        detection={"max_adversaries": 3},
    )
    assert isinstance(config, RunConfig) and config.attack.params == {"scale": 10.0}

    sink = Rounds()
    execute_run(config, run_id="readme", sink=sink, transport=inprocess_transport(config, "readme"))
    reports = sink.reports

    truth = adversaries(config)
    proven = {
        e.worker for r in reports for e in r.events if e.kind == EventKind.DISPUTES_ACROSS_ROUNDS
    }
    assert proven == truth
    assert all(set(r.flagged) <= truth for r in reports)
    # No round flags them on its own until they are proven: every round before ties. The
    # round that proves them counts its own disputes first, and then nothing ties.
    last = max(
        r.round for r in reports for e in r.events if e.kind == EventKind.DISPUTES_ACROSS_ROUNDS
    )
    assert {r.agreement.rule for r in reports if r.agreement and r.round < last} == {"unanimity"}
