from __future__ import annotations

import json
import os
import sys
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner, Result

from phalanx.aggregation import AGGREGATORS, PRE_AGGREGATORS
from phalanx.attacks import ATTACKS
from phalanx.codec import CodecConfig, Predictor
from phalanx.codec.config import CODEC_ONLY
from phalanx.config import (
    ATTACK_NAMES,
    MAX_CONFIG_BYTES,
    PreRule,
    Rule,
    RunConfig,
    load_run_config,
)
from phalanx_cli.main import app
from tests.support.plugin_files import SHRINK, STRICT, TOUCH_ON_IMPORT, PluginFiles

ROOT = Path(__file__).resolve().parents[2]
Allow = Callable[..., None]


def test_names_in_the_config_match_the_registries() -> None:
    assert set(typing.get_args(Rule)) == set(AGGREGATORS)
    assert set(typing.get_args(PreRule)) == set(PRE_AGGREGATORS)
    assert set(ATTACK_NAMES) == set(ATTACKS)


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.toml")), ids=lambda p: p.name)
def test_every_example_config_is_valid(path: Path) -> None:
    assert load_run_config(path).rounds >= 1


def test_demo_is_sts15_with_three_alie_adversaries() -> None:
    config = load_run_config(ROOT / "examples" / "demo.toml")
    assert (config.assignment.scheme, config.assignment.num_workers, config.assignment.r) == (
        "bibd",
        15,
        3,
    )
    assert (config.attack.name, config.attack.q) == ("alie", 3)
    assert (config.data.dataset, config.data.model) == ("fashion-mnist", "cnn")


def test_json_and_toml_configs_are_the_same_model(tmp_path: Path) -> None:
    config = load_run_config(ROOT / "examples" / "quick-digits.toml")
    path = tmp_path / "run.json"
    path.write_text(config.model_dump_json())
    assert load_run_config(path) == config


def test_a_config_path_that_is_no_regular_file_is_refused_before_any_read(tmp_path: Path) -> None:
    fifo = tmp_path / "blocks.toml"
    os.mkfifo(fifo)  # reading it would wait for a writer for ever
    zero = tmp_path / "endless.toml"
    zero.symlink_to("/dev/zero")  # reading it would fill the memory
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for path, words in ((fifo, "not a regular file"), (zero, "not a regular file")):
        with pytest.raises(ValueError, match=words):
            load_run_config(path)
    with pytest.raises(ValueError, match="a directory"):
        load_run_config(folder)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_run_config(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match=r"run configs are \.toml or \.json files"):
        load_run_config(Path("/dev/zero"))


def test_a_config_file_that_is_not_utf8_text_is_refused_in_words(tmp_path: Path) -> None:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00name = 1\n")
    with pytest.raises(ValueError, match="can't decode"):
        load_run_config(binary)


def test_a_config_file_larger_than_any_run_config_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ValueError, match="larger than 65,536 bytes: not a run config"):
        load_run_config(big)


@pytest.mark.parametrize(
    ("name", "text"), [("empty.toml", ""), ("blank.toml", "# nothing\n"), ("e.json", "{}")]
)
def test_a_config_with_no_settings_is_refused_rather_than_run_on_every_default(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match="holds no settings: an empty file would start a run"):
        load_run_config(path)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_an_integer_of_thousands_of_digits_is_refused_in_our_words(
    tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"long{suffix}"
    digits = "9" * 5001
    path.write_text(f"rounds = {digits}\n" if suffix == ".toml" else f'{{"rounds": {digits}}}')
    with pytest.raises(ValueError) as refused:
        load_run_config(path)
    assert str(refused.value) == "holds an integer of more than 4,300 digits: not a run config"


def _error(data: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as info:
        RunConfig.model_validate(data)
    return str(info.value)


def test_impossible_block_design_names_the_field_and_the_nearest_valid_size() -> None:
    message = _error({"assignment": {"scheme": "bibd", "num_workers": 14, "r": 3}})
    assert "assignment" in message and "13 or 15" in message


def test_rule_without_enough_files_for_its_f_is_refused() -> None:
    message = _error(
        {
            "assignment": {"scheme": "groups", "num_workers": 15, "r": 3},
            "aggregation": {"rule": "krum", "f": 2},
        }
    )
    assert "aggregation.rule='krum'" in message and "needs at least 7" in message


def test_unknown_attack_and_unknown_fields_are_refused_by_name() -> None:
    assert "unknown attack 'alie2'" in _error({"attack": {"name": "alie2", "q": 1}})
    assert "training.lr" in _error({"training": {"lr": 0.1}}).replace("\n", ".")
    assert "attack.name" in _error({"attack": {"q": 2}})


def test_plugin_attack_paths_are_accepted() -> None:
    config = RunConfig.model_validate({"attack": {"name": "redteam.attacks:Sneaky", "q": 1}})
    assert config.attack.name == "redteam.attacks:Sneaky"


def test_cli_refuses_an_invalid_config_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"assignment": {"scheme": "mols", "num_workers": 16, "r": 3}}))
    result = CliRunner().invoke(app, ["run", str(path)], env={"PHALANX_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 2
    assert "assignment" in result.output and "nearest valid K: 15" in result.output
    assert not (tmp_path / "phalanx.db").exists()


def test_codec_downlink_lambda_and_unbiased_round_trip_through_json_and_toml(
    tmp_path: Path,
) -> None:
    default = RunConfig().codec
    assert default.downlink_rd_lambda is None and not default.unbiased
    config = RunConfig.model_validate(
        {
            "codec": {
                "enabled": True,
                "rd_lambda": 1.0,
                "downlink_rd_lambda": 0.03,
                "unbiased": True,
            }
        }
    )
    assert (config.codec.rd_lambda, config.codec.downlink_rd_lambda) == (1.0, 0.03)
    assert config.codec.unbiased
    as_json = tmp_path / "run.json"
    as_json.write_text(config.model_dump_json())
    assert load_run_config(as_json) == config
    as_toml = tmp_path / "run.toml"
    as_toml.write_text(
        "[codec]\nenabled = true\nrd_lambda = 1.0\ndownlink_rd_lambda = 0.03\nunbiased = true\n"
    )
    assert load_run_config(as_toml).codec == config.codec


def test_codec_downlink_lambda_must_be_positive() -> None:
    for bad in (0.0, -0.1):
        assert "codec.downlink_rd_lambda" in _error({"codec": {"downlink_rd_lambda": bad}}).replace(
            "\n", "."
        )


RUN_CODEC_KEYS = {
    "enabled": False,
    "rd_lambda": 0.1,
    "downlink_rd_lambda": None,
    "step_sizes": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
    "ternary": True,
    "unbiased": False,
    "rounding": "independent",
    "rd_distortion": "update",
    "censor_threshold": 0.05,
    "history_length": 3,
    "low_rank": 0,
    "low_rank_step": 0.25,
    "error_feedback": False,
}


def test_the_run_config_s_codec_section_is_the_codec_s_own_config() -> None:
    assert type(RunConfig().codec) is CodecConfig
    config = RunConfig.model_validate({"codec": {"enabled": True, "rd_lambda": 1.0}})
    assert config.codec == CodecConfig(enabled=True, rd_lambda=1.0)


def test_the_codec_section_keeps_its_keys_defaults_and_schema() -> None:
    dumped = RunConfig().model_dump(mode="json")["codec"]
    assert list(dumped) == list(RUN_CODEC_KEYS) and dumped == RUN_CODEC_KEYS
    schema = RunConfig.model_json_schema()["$defs"]["CodecConfig"]
    assert list(schema["properties"]) == list(RUN_CODEC_KEYS)
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("name", sorted(CODEC_ONLY))
def test_the_codec_s_own_settings_never_enter_a_run_config(name: str) -> None:
    value = CodecConfig.model_fields[name].default
    assert name in _error({"codec": {name: value}})
    changed = {"predictors": (Predictor.MEAN,), "downlink_error_feedback": False}
    changed |= {"momentum": 0.5, "fit_gain": False, "rd_sample_size": 0}
    with pytest.raises(ValidationError, match=name):
        RunConfig(codec=CodecConfig(**{name: changed[name]}))


@pytest.mark.parametrize(
    ("codec", "field"),
    [
        ({"step_sizes": [0.5, -1.0]}, "step_sizes"),
        ({"step_sizes": [0.5, 0.0]}, "step_sizes"),
        ({"step_sizes": [0.5, 0.5]}, "step_sizes"),
        ({"step_sizes": [0.5, float("inf")]}, "step_sizes"),
        ({"step_sizes": [], "ternary": False}, "quantizer"),
        ({"censor_threshold": 1.0}, "censor_threshold"),
        ({"rd_lambda": float("inf")}, "rd_lambda"),
        ({"rd_lambda": 0.0}, "rd_lambda"),
        ({"downlink_rd_lambda": float("nan")}, "downlink_rd_lambda"),
    ],
)
def test_codec_settings_the_codec_cannot_use_are_refused_with_the_run_config(
    codec: dict[str, object], field: str
) -> None:
    assert field in _error({"codec": {"enabled": False, **codec}})


def test_a_ternary_only_codec_is_a_valid_run_config() -> None:
    config = RunConfig.model_validate({"codec": {"enabled": True, "step_sizes": []}})
    assert config.codec.step_sizes == () and config.codec.ternary


def test_the_run_configs_committed_with_benchmark_results_still_validate() -> None:
    stored = json.loads((ROOT / "benchmarks" / "results" / "round.json").read_text())["config"]
    assert RunConfig.model_validate(stored).codec.step_sizes == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    assert load_run_config(ROOT / "cli" / "phalanx_cli" / "demo.toml").codec.rd_lambda == 0.1


def test_the_config_screens_r1_updates_at_the_detection_default() -> None:
    from phalanx.detection import DEFAULT_OUTLIER_THRESHOLD

    assert RunConfig().detection.outlier_threshold == DEFAULT_OUTLIER_THRESHOLD


def test_the_outlier_ratio_defaults_by_data_mode_to_detections_and_is_at_least_1() -> None:
    from phalanx.detection import DEFAULT_OUTLIER_RATIO, LOCAL_OUTLIER_RATIO

    detection = RunConfig().detection
    assert detection.outlier_ratio is None
    assert detection.ratio_for("assigned") == DEFAULT_OUTLIER_RATIO
    assert detection.ratio_for("local") == LOCAL_OUTLIER_RATIO
    set_ratio = RunConfig.model_validate({"detection": {"outlier_ratio": 3}}).detection
    assert set_ratio.ratio_for("local") == set_ratio.ratio_for("assigned") == 3.0
    assert "detection.outlier_ratio" in _error({"detection": {"outlier_ratio": 0.5}}).replace(
        "\n", "."
    )


def test_a_malformed_plugin_reference_is_refused_by_name() -> None:
    assert "must look like 'package.module:Name'" in _error({"attack": {"name": "a:b:c", "q": 1}})
    assert "attack.name" in _error({"attack": {"name": "x" * 201, "q": 1}}).replace("\n", ".")


def test_an_installed_plugins_entry_point_name_is_a_known_attack(
    plugin_files: PluginFiles,
) -> None:
    plugin_files.distribution({"shrink_installed": f"{plugin_files.module(SHRINK)}:Shrink"})
    config = RunConfig.model_validate({"attack": {"name": "shrink_installed", "q": 1}})
    assert config.attack.name == "shrink_installed"


def _run_cli(tmp_path: Path, attack: dict[str, object]) -> Result:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"attack": {"q": 1, **attack}}))
    return CliRunner().invoke(app, ["run", str(path)], env={"PHALANX_DATA_DIR": str(tmp_path)})


def test_cli_refuses_an_attack_the_host_does_not_allow_without_importing_it(
    tmp_path: Path, plugin_files: PluginFiles, allow_attack_plugins: Allow
) -> None:
    module = plugin_files.module(TOUCH_ON_IMPORT)
    result = _run_cli(tmp_path, {"name": f"{module}:Attack"})
    assert result.exit_code == 2
    assert "not allowed on this host" in result.output
    popen = _run_cli(
        tmp_path,
        {"name": "subprocess:Popen", "params": {"args": f"touch {plugin_files.marker}"}},
    )
    assert popen.exit_code == 2
    assert not plugin_files.marker.exists() and module not in sys.modules
    assert not (tmp_path / "phalanx.db").exists()


@pytest.mark.parametrize(
    ("attack", "message"),
    [
        ({"name": "PLUGIN", "params": {"scale": "big"}}, "parameter 'scale'='big'"),
        ({"name": "PLUGIN", "params": {"scale": -1.0}}, "scale must be > 0"),
        ({"name": "constant", "params": {"valu": 1.0}}, "unexpected keyword argument 'valu'"),
    ],
)
def test_cli_refuses_parameters_an_attack_rejects_before_anything_starts(
    attack: dict[str, object],
    message: str,
    tmp_path: Path,
    plugin_files: PluginFiles,
    allow_attack_plugins: Allow,
) -> None:
    spec = f"{plugin_files.module(STRICT)}:Scaled"
    allow_attack_plugins(spec)
    if attack["name"] == "PLUGIN":
        attack = {**attack, "name": spec}
    result = _run_cli(tmp_path, attack)
    assert result.exit_code == 2
    assert "attack.params" in result.output and message in result.output.replace("\n", " ")
    assert not (tmp_path / "phalanx.db").exists()


@pytest.mark.parametrize(
    ("assignment", "field"),
    [
        ({"scheme": "random", "num_workers": 50000.0}, "assignment.num_workers"),
        ({"scheme": "random", "num_workers": "50000"}, "assignment.num_workers"),
        ({"scheme": "random", "num_files": "10000000"}, "assignment.num_files"),
        ({"scheme": "random", "num_files": 10**6 * 1.0}, "assignment.num_files"),
    ],
)
def test_size_limits_hold_on_the_coerced_values(assignment: dict[str, object], field: str) -> None:
    assert field in _error({"assignment": assignment}).replace("\n", ".")


def test_the_limits_admit_the_largest_allowed_run() -> None:
    config = RunConfig.model_validate(
        {"assignment": {"scheme": "random", "num_workers": 10000.0, "r": 3, "num_files": "100000"}}
    )
    assert (config.assignment.num_workers, config.assignment.num_files) == (10000, 100000)


def test_cli_refuses_a_coerced_limit_in_one_line_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text('[assignment]\nscheme = "random"\nnum_workers = 50000.0\n')
    result = CliRunner().invoke(app, ["run", str(path)], env={"PHALANX_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {path}: assignment.num_workers: Input should be less than or equal to 10000"
    ]


def test_datasets_are_named_in_one_of_the_four_forms() -> None:
    for good in ("fashion-mnist", "digits", "idx:kmnist", "npz:/data/mnist.npz"):
        assert RunConfig.model_validate({"data": {"dataset": good}}).data.dataset == good
    for bad in ("cifar10", "npz:", "idx", "npz:a\x00b"):
        assert "unknown dataset" in _error({"data": {"dataset": bad}})


def test_num_classes_is_optional_and_bounded() -> None:
    assert RunConfig().data.num_classes is None
    assert RunConfig.model_validate({"data": {"num_classes": "100"}}).data.num_classes == 100
    for bad in (1, 1001):
        assert "data.num_classes" in _error({"data": {"num_classes": bad}}).replace("\n", ".")


SWITCHES = [
    ("assignment", "relabel"),
    ("detection", "across_rounds"),
    ("codec", "enabled"),
    ("codec", "ternary"),
    ("codec", "unbiased"),
    ("codec", "error_feedback"),
    ("collect", "drop_compute"),
    ("systems", "enabled"),
]


@pytest.mark.parametrize("value", [1, 0, "true", "yes", 1.0], ids=repr)
@pytest.mark.parametrize(("section", "name"), SWITCHES, ids=lambda s: str(s))
def test_a_switch_takes_true_or_false_and_nothing_that_reads_as_one(
    section: str, name: str, value: object
) -> None:
    # `relabel = 1` once passed as true: a typo for a number must not turn a switch.
    with pytest.raises(ValidationError, match=f"{section}.{name}"):
        RunConfig.model_validate({section: {name: value}})
    assert (
        getattr(getattr(RunConfig.model_validate({section: {name: False}}), section), name) is False
    )
