from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from phalanx.attack_plugins import (
    AttackPluginError,
    build_attack,
    installed_attacks,
    is_reference,
    resolve_attack_class,
)
from phalanx.attacks import ATTACKS, ALittleIsEnough, AttackContext, check_attack, load_attack
from phalanx.config import AttackConfig, RunConfig
from phalanx.data import load_dataset
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker
from tests.support.configs import small_config
from tests.support.plugin_files import SHRINK, STRICT, TOUCH_ON_IMPORT, TOUCH_ON_INIT, PluginFiles

Allow = Callable[..., None]


def build(spec: str, allowed: tuple[str, ...] = (), **params: object) -> object:
    return build_attack(spec, params, builtins=ATTACKS, allowed=allowed)


def ctx() -> AttackContext:
    return AttackContext(round=0, file=0, worker=0, num_workers=3, num_byzantine=1)


# --------------------------------------------------------------- what may be imported


@pytest.mark.parametrize(
    "spec", ["subprocess:Popen", "os:system", "builtins:exec", "phalanx.attacks:Attack"]
)
def test_a_reference_the_host_does_not_allow_is_refused_by_name(spec: str) -> None:
    with pytest.raises(AttackPluginError, match="not allowed on this host") as info:
        build(spec)
    assert info.value.field == "name"
    assert "PHALANX_ATTACK_PLUGINS" in str(info.value)


def test_a_module_the_host_does_not_allow_is_never_imported(plugin_files: PluginFiles) -> None:
    module = plugin_files.module(TOUCH_ON_IMPORT)
    with pytest.raises(AttackPluginError, match="not allowed"):
        build(f"{module}:Attack")
    assert module not in sys.modules
    assert not plugin_files.marker.exists()


def test_popen_and_system_are_refused_without_being_called_even_when_allowed(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "spawned"
    command = f"touch {marker}"
    with pytest.raises(AttackPluginError, match="must declare the class attribute `name"):
        build("subprocess:Popen", ("subprocess:Popen",), args=command, shell=True)
    with pytest.raises(AttackPluginError, match="must name a class"):
        build("os:system", ("os:system",), command=command)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("NoName", "must declare the class attribute `name"),
        ("NoMethod", "neither protocol"),
        ("NameProperty", "must declare the class attribute `name"),
        ("WrongArity", r"__call__ must take \(self, honest, ctx\)"),
    ],
)
def test_an_allowed_class_that_is_not_an_attack_is_refused_before_anything_of_it_runs(
    attr: str, message: str, plugin_files: PluginFiles
) -> None:
    spec = f"{plugin_files.module(TOUCH_ON_INIT)}:{attr}"
    with pytest.raises(AttackPluginError, match=message):
        build(spec, (spec,))
    assert not plugin_files.marker.exists()


def test_an_allowed_module_that_cannot_be_imported_is_explained(plugin_files: PluginFiles) -> None:
    broken = plugin_files.module("raise RuntimeError('no GPU here')\n")
    with pytest.raises(AttackPluginError, match=r"cannot import .*RuntimeError: no GPU here"):
        build(f"{broken}:Attack", (f"{broken}:Attack",))
    with pytest.raises(AttackPluginError, match="cannot import"):
        build("phalanx_no_such_module_xyz:Attack", ("phalanx_no_such_module_xyz:Attack",))
    shrink = plugin_files.module(SHRINK)
    with pytest.raises(AttackPluginError, match="has no 'Missing'"):
        build(f"{shrink}:Missing", (f"{shrink}:Missing",))


@pytest.mark.parametrize("spec", ["x:", ":X", "a:b:c", "a-b:C", "a.:C", "os:system()", "alie2"])
def test_malformed_references_and_unknown_names_are_refused(spec: str) -> None:
    with pytest.raises(AttackPluginError, match=r"package\.module:Name|unknown attack"):
        build(spec, (spec,))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a:B", True), ("pkg.mod_2:Outer.Inner", True), ("a:", False), ("a b:C", False)],
)
def test_is_reference_accepts_dotted_module_and_attribute_only(text: str, expected: bool) -> None:
    assert is_reference(text) is expected


# --------------------------------------------------------------- installed plug-ins


def test_an_installed_entry_point_loads_by_its_name_and_by_its_target(
    plugin_files: PluginFiles,
) -> None:
    module = plugin_files.module(SHRINK)
    plugin_files.distribution({"shrink_it": f"{module}:Shrink"})
    assert set(installed_attacks()) >= {"shrink_it"}
    by_name = build("shrink_it", factor=0.25)
    by_target = build(f"{module}:Shrink", factor=0.25)
    assert by_name == by_target
    assert torch.equal(by_name(torch.tensor([4.0]), ctx()), torch.tensor([1.0]))  # type: ignore[operator]


def test_an_entry_point_never_shadows_a_built_in(plugin_files: PluginFiles) -> None:
    module = plugin_files.module(SHRINK)
    plugin_files.distribution({"alie": f"{module}:Shrink"})
    assert resolve_attack_class("alie", builtins=ATTACKS, allowed=()) is ALittleIsEnough


def test_a_name_two_distributions_register_differently_is_ambiguous(
    plugin_files: PluginFiles,
) -> None:
    first, second = plugin_files.module(SHRINK), plugin_files.module(SHRINK)
    plugin_files.distribution({"twice": f"{first}:Shrink"})
    plugin_files.distribution({"twice": f"{second}:Shrink"})
    with pytest.raises(AttackPluginError, match="ambiguous"):
        build("twice")
    assert first not in sys.modules and second not in sys.modules


# --------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "missing a required argument: 'scale'"),
        ({"scale": 2.0, "sacle": 1.0}, "unexpected keyword argument 'sacle'"),
        ({"scale": "2"}, "parameter 'scale'='2': Input should be a valid number"),
        ({"scale": True}, "parameter 'scale'=True"),
        ({"scale": 2.0, "mode": 3}, "parameter 'mode'=3: Input should be a valid string"),
        ({"scale": float("nan")}, "must be a finite number"),
        ({"scale": [1.0]}, "must be a finite number"),
        ({"scale": 1.0, "_private": 1}, "not a parameter name"),
        ({"scale": -1.0}, "ValueError: scale must be > 0"),
    ],
)
def test_parameters_are_checked_against_the_constructor(
    params: dict[str, object], message: str, plugin_files: PluginFiles
) -> None:
    spec = f"{plugin_files.module(STRICT)}:Scaled"
    with pytest.raises(AttackPluginError, match=message) as info:
        build(spec, (spec,), **params)
    assert info.value.field == "params"


def test_parameters_are_passed_with_their_annotated_types(plugin_files: PluginFiles) -> None:
    spec = f"{plugin_files.module(STRICT)}:Scaled"
    attack = build(spec, (spec,), scale=2, mode="loud")
    assert type(attack.scale) is float and attack.scale == 2.0  # type: ignore[attr-defined]
    assert build("constant", value=3) == ATTACKS["constant"](value=3.0)  # type: ignore[call-arg]


# --------------------------------------------------------------- one loader for every caller


def test_load_attack_and_check_attack_follow_the_hosts_allow_list(
    plugin_files: PluginFiles, allow_attack_plugins: Allow
) -> None:
    spec = f"{plugin_files.module(SHRINK)}:Shrink"
    config = AttackConfig(name=spec, q=1, params={"factor": 0.1})
    with pytest.raises(AttackPluginError, match="not allowed"):
        load_attack(spec)
    with pytest.raises(AttackPluginError, match="not allowed"):
        check_attack(config)
    allow_attack_plugins(spec)
    assert load_attack(spec, factor=0.1).name == "shrink"
    check_attack(config)
    with pytest.raises(AttackPluginError, match="not allowed"):
        check_attack(config, allowed=())  # an explicit allow-list replaces the host's
    with pytest.raises(AttackPluginError):
        check_attack(AttackConfig(name=spec, params={"factor": "x"}))


def _in_process(config: RunConfig, run_id: str) -> InProcessTransport:
    train = load_dataset(config.data.dataset, "train")
    team = RedTeam.from_config(config)
    workers = {
        ident.worker: Worker(
            config=config,
            train_set=train,
            client_id=ident.client_id,
            private_key=ident.private_key,
            behaviour=team.behaviour_of(ident.worker) if team else None,
        )
        for ident in simulated_roster(run_id, config.assignment.num_workers)
    }
    return InProcessTransport(workers)


class FakeSink:
    """Keeps round reports in memory (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def test_an_allowed_plugin_attacks_an_in_process_run_and_is_flagged(
    plugin_files: PluginFiles, allow_attack_plugins: Allow
) -> None:
    spec = f"{plugin_files.module(SHRINK)}:Shrink"
    allow_attack_plugins(spec)
    config = small_config(rounds=1, attack={"name": spec, "q": 2, "params": {"factor": -50.0}})
    check_attack(config.attack)
    sink = FakeSink()
    execute_run(config, run_id="plugin-run", sink=sink, transport=_in_process(config, "plugin-run"))
    truth = adversaries(config)
    assert len(truth) == 2 and len(sink.reports) == 1
    assert all(set(report.flagged) == truth for report in sink.reports)


def test_the_loader_and_the_config_import_no_torch() -> None:
    script = (
        "import sys, phalanx.attack_plugins, phalanx.config, phalanx.settings; "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
