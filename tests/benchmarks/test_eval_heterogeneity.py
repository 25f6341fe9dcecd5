"""eval_heterogeneity.py as a command: the report from stored rows, and mixing refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmarks import eval_heterogeneity
from benchmarks.lib import results
from benchmarks.lib.heterogeneity_grid import IN_PROCESS, PARTITIONS, Settings, grid
from benchmarks.lib.heterogeneity_runs import Row

STORED = Settings(rounds=30, model="mlp", steps=10, batch_size=32, lr=0.05, eval_samples=2000)


def _row(aggregator: str, accuracy: float, **fields: object) -> Row:
    values: dict[str, object] = {
        "partition": "dirichlet",
        "alpha": 0.3,
        "aggregator": aggregator,
        "attack": "none",
        "q": 0,
        "final_accuracy": accuracy,
        "honest_flagged": 0.0,
        "precision": None,
        "recall": None,
        "transport": IN_PROCESS,
        "rule": aggregator,
        "pre": None,
        "rounds": 30,
        "adversaries": [],
        "flagged_by_round": [],
        "byzfl_gap": 1e-9,
        "model_digest": "d",
        "seconds": 1.0,
    }
    return Row(**{**values, **fields})  # type: ignore[arg-type]


def _store(
    folder: Path, rows: list[Row], settings: Settings = STORED, name: str = "heterogeneity"
) -> None:
    results.write_json(
        folder / f"{name}.json",
        {"settings": dataclasses.asdict(settings), "rows": [dataclasses.asdict(r) for r in rows]},
    )


def test_report_only_writes_the_report_from_the_stored_rows_and_their_settings(
    tmp_path: Path,
) -> None:
    _store(tmp_path, [_row("median", 0.71), _row("mean", 0.8, honest_flagged=0.04)])

    assert eval_heterogeneity.main(["--report-only", "--out", str(tmp_path)]) == 0

    text = (tmp_path / "heterogeneity.md").read_text(encoding="utf-8")
    assert "Fashion-MNIST MLP, K = 20, r = 1, 30 rounds of 10 local SGD steps" in text
    assert "| median | 71.0 |" in text and "| mean | 80.0 |" in text
    assert "at alpha 0.3: missed (2.00 % over 2 runs without attack)" in text
    assert "Examined on this grid" in text


def test_the_cnn_keeps_its_own_files_beside_the_mlp(tmp_path: Path) -> None:
    _store(tmp_path, [_row("median", 0.71)])
    cnn = dataclasses.replace(STORED, model="cnn")
    _store(tmp_path, [_row("median", 0.83)], cnn, "heterogeneity_cnn")

    assert eval_heterogeneity.main(["--model", "cnn", "--report-only", "--out", str(tmp_path)]) == 0

    text = (tmp_path / "heterogeneity_cnn.md").read_text(encoding="utf-8")
    assert "Fashion-MNIST CNN" in text and "| median | 83.0 |" in text
    assert "Examined on this grid" not in text  # the MLP grid's near-ties are not the CNN's
    assert not (tmp_path / "heterogeneity.md").exists()


def test_the_report_names_every_host_the_rows_ran_on(tmp_path: Path) -> None:
    rows = [_row("median", 0.71, host="AMD EPYC"), _row("mean", 0.8, host="AMD EPYC")]
    _store(tmp_path, [*rows, _row("trimmed_mean", 0.7)])

    assert eval_heterogeneity.main(["--report-only", "--out", str(tmp_path)]) == 0

    text = (tmp_path / "heterogeneity.md").read_text(encoding="utf-8")
    assert "Hosts: AMD EPYC (2 runs), not recorded (1 run);" in text


def test_merging_rows_of_other_settings_is_refused_in_words(tmp_path: Path) -> None:
    _store(tmp_path, [_row("median", 0.71)])
    argv = ["--merge", "--rounds", "5", "--model", "mlp", "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match="would mix them"):
        eval_heterogeneity.main(argv)


def test_an_unknown_partition_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown partitions: dirichlet-9; choose from iid"):
        eval_heterogeneity.main(["--partitions", "dirichlet-9", "--out", str(tmp_path)])


def test_rows_stored_when_the_seed_was_a_setting_still_merge_and_report(tmp_path: Path) -> None:
    _store(tmp_path, [_row("median", 0.71)])
    document = results.read_json(tmp_path / "heterogeneity.json")
    document["settings"]["seed"] = 2026
    del document["rows"][0]["seed"]
    results.write_json(tmp_path / "heterogeneity.json", document)

    assert eval_heterogeneity.main(["--report-only", "--out", str(tmp_path)]) == 0
    assert "| median | 71.0 |" in (tmp_path / "heterogeneity.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("seeds", ["2026,x", ",", "1.5"])
def test_seeds_that_are_not_whole_numbers_are_refused_in_words(tmp_path: Path, seeds: str) -> None:
    with pytest.raises(SystemExit, match="--seeds"):
        eval_heterogeneity.main(["--seeds", seeds, "--out", str(tmp_path)])


def test_missing_only_leaves_out_the_cases_with_a_stored_row_but_not_failed_ones() -> None:
    cases = grid(PARTITIONS[2:3], ("median", "mean"), (None,), (), (0,))
    stored = [_row("median", 0.7), _row("mean", None, error="boom")]
    assert [c.aggregator for c in eval_heterogeneity.missing(cases, stored)] == ["mean"]
    other_seed = grid(PARTITIONS[2:3], ("median",), (None,), (), (0,), (2027,))
    assert eval_heterogeneity.missing(other_seed, stored) == other_seed


def test_missing_only_needs_merge(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="give --merge too"):
        eval_heterogeneity.main(["--missing-only", "--out", str(tmp_path)])
