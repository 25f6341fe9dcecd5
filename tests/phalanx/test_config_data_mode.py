"""The data mode of a run config: local data's settings checked, r > 1 refused, simulation runs.

``data.mode = "local"`` runs in simulation (``phalanx.local_rounds``) and in a deployment (each
client reads the data its node config names), simulated attacks with it in simulation; what it
cannot do or mean (attack strategies and strong selection, which choose by replica placement;
attacks in a deployment; the systems model) and a partition in a deployment are refused in words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.config import RunConfig, load_run_config
from phalanx.validation_messages import one_line

NOT_WIRED = "not wired into runs yet"
LOCAL: dict[str, Any] = {
    "data": {"dataset": "digits", "model": "mlp", "mode": "local"},
    "assignment": {"scheme": "none", "num_workers": 10, "r": 1},
    "aggregation": {"rule": "mean"},
}


def local(**sections: dict[str, Any]) -> dict[str, Any]:
    config = {key: dict(value) for key, value in LOCAL.items()}
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value}
    return config


def refusal(config: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        RunConfig.model_validate(config)
    return one_line(raised.value, RunConfig)


def test_the_default_mode_is_assigned_data_and_configs_say_nothing_new() -> None:
    config = RunConfig()

    assert (config.data.mode, config.data.partition, config.data.local) == (
        "assigned",
        None,
        None,
    )
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


@pytest.mark.parametrize(
    "assignment",
    [
        {"scheme": "bibd", "num_workers": 7, "r": 3},
        {"scheme": "none", "num_workers": 10, "r": 2},
        {"scheme": "random", "num_workers": 10, "r": 3, "num_files": 10},
        {"scheme": "groups", "num_workers": 10, "r": 2},
    ],
)
def test_local_data_with_replicas_is_refused_because_they_cannot_be_compared(
    assignment: dict[str, Any],
) -> None:
    message = refusal(local(assignment=assignment))

    assert "replicas of private data cannot be compared" in message
    assert "assignment.r = 1" in message
    assert NOT_WIRED not in message


def test_local_data_needs_the_scheme_none_even_at_r_1() -> None:
    message = refusal(local(assignment={"scheme": "random", "r": 1, "num_files": 10}))

    assert "data.mode = 'local' needs assignment.scheme = 'none'" in message


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"partition": {"kind": "dirichlet", "alpha": 0.3}},
        {"partition": {"kind": "shards", "labels_per_client": 2, "seed": 4}},
        {"partition": {"kind": "quantity", "alpha": 1.0, "min_partition_size": 5}},
        {"local": {"epochs": 2, "batch_size": 16, "lr": 0.05, "optimizer": "momentum"}},
    ],
)
def test_a_valid_local_config_in_simulation_is_accepted(data: dict[str, Any]) -> None:
    config = RunConfig.model_validate(local(data=data))

    assert config.data.mode == "local"
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


def test_a_local_config_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "local.toml"
    path.write_text(
        '[data]\ndataset = "digits"\nmode = "local"\n'
        '[data.partition]\nkind = "dirichlet"\nalpha = 0.3\n'
        '[data.local]\nsteps = 20\noptimizer = "adam"\n'
        '[assignment]\nscheme = "none"\nnum_workers = 20\nr = 1\n'
        '[aggregation]\nrule = "mean"\n'
    )

    config = load_run_config(path)

    assert config.data.partition is not None and config.data.partition.alpha == 0.3
    assert config.data.local is not None and config.data.local.steps == 20


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"data": {"partition": {"kind": "iid"}}},
            "data: data.partition applies to data.mode = 'local' only",
        ),
        (
            {"data": {"partition": {"kind": "iid"}, "local": {"epochs": 1}}},
            "data.partition and data.local apply to data.mode = 'local' only",
        ),
        (local(data={"samples_per_file": 16}), "data.samples_per_file sizes the files"),
        (
            local(data={"partition": {"kind": "shards", "labels_per_client": 11}}),
            "labels_per_client=11 exceeds the 10 classes of 'digits'",
        ),
        (
            local(
                data={
                    "dataset": "npz:x.npz",
                    "num_classes": 3,
                    "partition": {"kind": "shards", "labels_per_client": 4},
                }
            ),
            "labels_per_client=4 exceeds the 3 classes",
        ),
        (local(training={"local_steps": 5}), "training.local_steps apply to assigned data"),
        (
            local(training={"local_lr": 0.1, "local_steps": 2}),
            "training.local_lr and training.local_steps apply to assigned data",
        ),
        (
            local(
                deployment={"backend": "deployment"},
                data={"partition": {"kind": "dirichlet", "alpha": 1.0}},
            ),
            "a deployed client trains on the data its node config names (data-path)",
        ),
    ],
)
def test_settings_the_mode_would_not_read_are_refused_in_words(
    config: dict[str, Any], expected: str
) -> None:
    assert expected in refusal(config)


def test_a_deployment_takes_local_data_with_no_partition_and_round_trips() -> None:
    config = RunConfig.model_validate(local(deployment={"backend": "deployment"}))

    assert (config.data.mode, config.data.partition, config.deployment.backend) == (
        "local",
        None,
        "deployment",
    )
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"attack": {"name": "sign_flip", "q": 2, "strategy": "only_majorities"}},
            "attack.strategy = 'only_majorities' with data.mode = 'local': it chooses files by "
            "who else holds them",
        ),
        (
            {"attack": {"name": "alie", "q": 2, "strategy": "fixed_disagreement"}},
            "use attack.strategy = 'all'",
        ),
        (
            {"attack": {"name": "ipm", "q": 2, "selection": "strong"}},
            "attack.selection = 'strong' with data.mode = 'local': strong selection picks the "
            "workers that hold the most file majorities",
        ),
        (
            {"attack": {"name": "sign_flip", "q": 2}, "deployment": {"backend": "deployment"}},
            "attack.q > 0 with data.mode = 'local' in a deployment: simulated adversaries exist "
            "only in simulation",
        ),
        (
            {"systems": {"enabled": True}},
            "systems.enabled with data.mode = 'local': the systems model times assigned files",
        ),
        (
            {"collect": {"policy": "fastest_k", "k": 5}},
            "collect.policy = 'fastest_k' needs arrival times",
        ),
    ],
)
def test_what_local_data_cannot_do_yet_is_refused_in_words(
    sections: dict[str, Any], expected: str
) -> None:
    message = refusal(local(**sections))

    assert expected in message
    assert NOT_WIRED not in message


@pytest.mark.parametrize("name", ["alie", "ipm", "sign_flip", "label_flip", "reversed_gradient"])
@pytest.mark.parametrize("q", [2, 4])
def test_simulated_attacks_on_local_data_are_accepted(name: str, q: int) -> None:
    config = RunConfig.model_validate(
        local(assignment={"num_workers": 20}, attack={"name": name, "q": q})
    )

    assert (config.data.mode, config.attack.name, config.attack.q) == ("local", name, q)
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config


@pytest.mark.parametrize(
    ("attack", "expected"),
    [
        ({"name": "alie", "q": 10}, "attack.q=10 must be below assignment.num_workers=10"),
        ({"name": "alie", "q": -1}, "attack.q"),
        ({"q": 2}, "attack.q > 0 needs attack.name"),
        ({"name": "alie", "q": True}, "attack.q"),
        ({"name": "ALIE; rm -rf /", "q": 2}, "unknown attack"),
        ({"name": "alie", "q": 2, "strategy": "everything"}, "attack.strategy"),
    ],
)
def test_hostile_attacks_on_local_data_are_refused_in_words(
    attack: dict[str, Any], expected: str
) -> None:
    message = refusal(local(attack=attack))

    assert expected in message
    assert "Traceback" not in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"partition": {"kind": "dirichlet", "alpah": 0.3}}, "did you mean `alpha`?"),
        ({"local": {"epoch": 2}}, "did you mean `epochs`?"),
        ({"partition": {"kind": "dirichlet", "alpha": float("nan")}}, "data.partition.alpha"),
        ({"partition": {"kind": "dirichlet", "alpha": -1}}, "data.partition.alpha"),
        ({"partition": {"kind": "dirichlet", "alpha": True}}, "data.partition.alpha"),
        ({"local": {"lr": float("inf")}}, "data.local.lr"),
        ({"local": {"evaluate_evry": 2}}, "did you mean `evaluate_every`?"),
        ({"local": {"evaluate_every": -1}}, "data.local.evaluate_every"),
        ({"local": {"test_fraction": 1.5}}, "data.local.test_fraction"),
        ({"mode": "federated"}, "data.mode: Input should be 'assigned' or 'local'"),
    ],
)
def test_hostile_or_misspelt_fields_are_named(data: dict[str, Any], expected: str) -> None:
    assert expected in refusal(local(data=data))
