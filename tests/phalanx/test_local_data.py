"""A simulated client's own data: its part of the run's seeded partition, from the config."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from phalanx.data import ImageDataset, load_dataset
from phalanx.data_mode import ModelShape
from phalanx.local_data import client_data, model_shape, run_partition
from tests.support.configs import local_config


def test_every_process_derives_the_same_partition_from_the_config() -> None:
    config = local_config(data={"partition": {"kind": "dirichlet", "alpha": 0.3}})
    train = load_dataset("digits", "train")

    first, report = run_partition(config, train)
    again, _ = run_partition(config, load_dataset("digits", "train"))

    assert len(first) == 6 and all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert report.kind == "dirichlet" and dict(report.parameters)["seed"] == config.seed
    assert sum(report.samples) == len(train)


def test_a_client_gets_exactly_its_part() -> None:
    config = local_config()
    train = load_dataset("digits", "train")
    partition, report = run_partition(config, train)

    mine = client_data(train, partition, 4)

    assert len(mine) == report.samples[4]
    assert torch.equal(mine.y, train.y[torch.from_numpy(partition[4])])
    assert torch.equal(mine.x, train.x[torch.from_numpy(partition[4])])


def test_no_part_or_an_empty_part_is_said_in_words() -> None:
    train = load_dataset("digits", "train")
    partition = (np.arange(10, dtype=np.int64), np.array([], dtype=np.int64))

    with pytest.raises(ValueError, match="the partition gave worker 1 no samples"):
        client_data(train, partition, 1)
    with pytest.raises(ValueError, match="worker 2 has no part in a partition of 2 clients"):
        client_data(train, partition, 2)


def test_the_model_shape_is_the_datasets() -> None:
    data = ImageDataset(
        x=torch.zeros((3, 1, 28, 28)), y=torch.tensor([0, 1, 2]), num_classes=7, name="t"
    )

    assert model_shape(data) == ModelShape(1, 28, 7)
    assert model_shape(load_dataset("digits", "test")).as_list() == [1, 8, 10]
