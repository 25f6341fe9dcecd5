"""A launched run's data: inside the datasets directory only, and checked when present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from phalanx.data_files import OUTSIDE_DATASETS_DIR
from phalanx_api.settings import ApiSettings
from tests.support.configs import small_config
from tests.support.factories import Keys, TestClient, settings_for

RUNS = "/api/v1/runs"


def _write_npz(path: Path, *, train_labels: np.ndarray | None = None) -> Path:
    """An 8x8 archive with 120 training and 20 test images, labels 0..9 by default."""
    path.parent.mkdir(parents=True, exist_ok=True)
    images = (np.arange(120 * 64) % 256).astype(np.uint8).reshape(120, 8, 8)
    np.savez(
        path,
        x_train=images,
        y_train=np.arange(120) % 10 if train_labels is None else train_labels,
        x_test=images[:20],
        y_test=np.arange(20) % 10,
    )
    return path


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The server's datasets directory, and a directory beside it with a private file."""
    root = tmp_path_factory.mktemp("host")
    datasets, private = root / "datasets", root / "private"
    _write_npz(datasets / "good.npz")
    _write_npz(datasets / "sub" / "nested.npz")
    _write_npz(datasets / "one-based.npz", train_labels=np.arange(120) % 10 + 1)
    _write_npz(private / "secret.npz")
    (datasets / "escape.npz").symlink_to(private / "secret.npz")
    (datasets / "escape-dir").symlink_to(private)
    return datasets, private


@pytest.fixture(scope="module")
def api_settings(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory, hosts: tuple[Path, Path]
) -> ApiSettings:
    return settings_for(module_database_url, tmp_path_factory.mktemp("data"), datasets_dir=hosts[0])


def _launch(client: TestClient, keys: Keys, dataset: str, **data: Any) -> Any:
    config = small_config(data={"dataset": "digits", **data}, attack={"name": None, "q": 0})
    body = config.model_dump(mode="json")
    body["data"]["dataset"] = dataset
    return client.post(RUNS, json=body, headers=keys.headers("operator"))


def test_paths_outside_the_datasets_dir_get_one_answer_whether_they_exist_or_not(
    client: TestClient, api_keys: Keys, hosts: tuple[Path, Path]
) -> None:
    private = hosts[1]
    attempts = [
        f"npz:{private / 'secret.npz'}",  # exists
        f"npz:{private / 'missing.npz'}",  # does not
        "npz:../private/secret.npz",
        "npz:sub/../../private/secret.npz",
        "npz:escape.npz",  # a symlink out of the directory
        "idx:escape-dir",
        "npz:/etc/passwd",
        "idx:/etc",
    ]
    answers = [_launch(client, api_keys, dataset) for dataset in attempts]
    assert [a.status_code for a in answers] == [422] * len(attempts)
    details = {a.json()["detail"] for a in answers}
    assert details == {f"body.data.dataset: {OUTSIDE_DATASETS_DIR}"}
    assert str(private) not in details.pop()


def test_a_path_inside_is_stored_relative_to_the_datasets_dir(
    client: TestClient, api_keys: Keys, hosts: tuple[Path, Path]
) -> None:
    datasets, _ = hosts
    for given, stored in [
        (f"npz:{datasets / 'good.npz'}", "npz:good.npz"),
        ("npz:sub/../good.npz", "npz:good.npz"),
        ("npz:sub/nested.npz", "npz:sub/nested.npz"),
    ]:
        response = _launch(client, api_keys, given)
        assert response.status_code == 202, response.json()
        assert response.json()["config"]["data"]["dataset"] == stored


def test_bad_data_inside_is_422_naming_the_file_and_the_fix_without_host_paths(
    client: TestClient, api_keys: Keys, hosts: tuple[Path, Path]
) -> None:
    response = _launch(client, api_keys, "npz:one-based.npz")
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith("body.data.dataset: npz:one-based.npz[y_train]: labels run 1..10")
    assert "subtract 1" in detail and str(hosts[0]) not in detail


def test_a_batch_larger_than_the_training_split_is_422(client: TestClient, api_keys: Keys) -> None:
    response = _launch(client, api_keys, "npz:good.npz", samples_per_file=100)
    assert response.status_code == 422
    assert "120 training samples, fewer than one round's batch of 700" in response.json()["detail"]


def test_data_absent_from_this_host_is_left_to_the_coordinator(
    client: TestClient, api_keys: Keys
) -> None:
    response = _launch(client, api_keys, "npz:elsewhere/later.npz")
    assert response.status_code == 202
    assert response.json()["config"]["data"]["dataset"] == "npz:elsewhere/later.npz"
