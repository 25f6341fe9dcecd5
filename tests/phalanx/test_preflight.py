"""A run's data checked against its config before anything is recorded or started."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phalanx.data_checks import DataError
from phalanx.preflight import check_run_data, round_batch_size
from tests.support.configs import local_config, small_config


def _archive(path: Path, *, n_train: int, side: int = 8) -> str:
    images = np.zeros((n_train, side, side), dtype=np.uint8)
    labels = np.arange(n_train) % 10
    np.savez(path, x_train=images, y_train=labels, x_test=images[:10], y_test=labels[:10])
    return f"npz:{path}"


def test_the_batch_is_samples_per_file_times_the_files_of_the_assignment() -> None:
    # STS(7): 7 files per round; STS(15): 35.
    assert round_batch_size(small_config(data={"samples_per_file": 16})) == 7 * 16
    config = small_config(assignment={"num_workers": 15}, data={"samples_per_file": 32})
    assert round_batch_size(config) == 35 * 32


def test_a_training_split_smaller_than_one_round_is_refused(tmp_path: Path) -> None:
    config = small_config(data={"dataset": _archive(tmp_path / "d.npz", n_train=111)})
    with pytest.raises(DataError, match=r"111 training samples, fewer than one round's batch"):
        check_run_data(config)
    enough = small_config(data={"dataset": _archive(tmp_path / "e.npz", n_train=112)})
    assert check_run_data(enough).train_size == 112


def test_stated_classes_reach_the_check(tmp_path: Path) -> None:
    dataset = _archive(tmp_path / "d.npz", n_train=120)
    with pytest.raises(DataError, match=r"label 9 is outside 0..4 \(data.num_classes=5\)"):
        check_run_data(small_config(data={"dataset": dataset, "num_classes": 5}))


def test_images_too_small_for_the_cnn_are_refused(tmp_path: Path) -> None:
    dataset = _archive(tmp_path / "d.npz", n_train=120, side=3)
    with pytest.raises(DataError, match=r"3x3 images are too small for data.model='cnn'"):
        check_run_data(small_config(data={"dataset": dataset, "model": "cnn"}))
    assert check_run_data(small_config(data={"dataset": dataset, "model": "mlp"})).shape[1] == 3


def test_digits_are_stated_as_ten_classes() -> None:
    facts = check_run_data(small_config())
    assert (facts.num_classes, facts.inferred, facts.train_size) == (10, False, 1438)


def test_local_data_needs_a_sample_per_client_not_a_round_of_files() -> None:
    # 1,438 digits: 100 clients of 32-sample files would be 3,200, but local data has no files.
    many = local_config(assignment={"num_workers": 100})
    too_many = local_config(assignment={"num_workers": 2000})

    assert check_run_data(many).train_size == 1438
    with pytest.raises(DataError, match="1438 training samples for 2000 clients"):
        check_run_data(too_many)


def test_a_deployment_counts_no_parts_of_the_runs_dataset() -> None:
    # Its clients train on their own data: the run's dataset gives the model and evaluation.
    deployed = local_config(assignment={"num_workers": 2000}, deployment={"backend": "deployment"})

    assert check_run_data(deployed).train_size == 1438
