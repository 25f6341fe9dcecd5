"""A file's update from the samples its task names equals the update the whole plan gave."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.nets import build_model, flatten_params, init_model, load_flat_
from phalanx.plan import file_samples, round_assignment
from phalanx.training import compute_update, derive_seed
from phalanx_clients.file_updates import compute_file_updates
from tests.support.configs import small_config
from tests.support.planned_tasks import planned_task

TRAIN = load_dataset("digits", "train")


def whole_plan_updates(
    config: RunConfig, train: ImageDataset, round: int, worker: int, params: Tensor
) -> dict[int, Tensor]:
    """How a worker computed its updates before tasks carried their samples."""
    assignment = round_assignment(config, round)
    samples = file_samples(config, len(train.y), round, assignment.num_files)
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    load_flat_(model, params)
    return {
        f: compute_update(
            model,
            train.x[samples[f]],
            train.y[samples[f]],
            seed=derive_seed(config.seed, round, f),
            local_steps=config.training.local_steps,
            lr=config.training.local_lr,
        )
        for f in assignment.files_of(worker)
    }


@settings(max_examples=12, deadline=None)
@given(
    scheme=st.sampled_from([("random", 30, 3), ("bibd", 7, 3), ("groups", 12, 3), ("none", 9, 1)]),
    seed=st.integers(0, 2**31 - 1),
    round=st.integers(1, 20),
    relabel=st.booleans(),
    local_steps=st.integers(1, 2),
)
def test_the_task_s_samples_give_the_updates_the_whole_plan_gave(
    scheme: tuple[str, int, int], seed: int, round: int, relabel: bool, local_steps: int
) -> None:
    name, k, r = scheme
    config = small_config(
        seed=seed,
        assignment={"scheme": name, "num_workers": k, "r": r, "relabel": relabel},
        training={"local_steps": local_steps},
        attack={"name": None, "q": 0},
    )
    params = flatten_params(init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=3))
    worker = k // 2
    task = planned_task(config, len(TRAIN.y), round, worker)

    new = compute_file_updates(config, TRAIN, round, task.samples_by_file(), params)
    old = whole_plan_updates(config, TRAIN, round, worker, params)

    assert new.keys() == old.keys()
    assert all(torch.equal(new[f], old[f]) for f in new)


@pytest.mark.parametrize("indices", [(), (0, len(TRAIN.y)), (-1,)])
def test_samples_outside_the_worker_s_data_are_refused_in_words(indices: tuple[int, ...]) -> None:
    config = small_config()
    params = flatten_params(init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=3))

    with pytest.raises(ValueError, match="outside the 1438 training samples"):
        compute_file_updates(config, TRAIN, 1, {4: indices}, params)


def test_a_data_attack_trains_each_file_on_the_labels_it_gives() -> None:
    # A plug-in's own poisoning, not the label flip in its place.
    config = small_config(attack={"name": None, "q": 0})
    task = planned_task(config, len(TRAIN.y), 2, worker=0)
    samples = task.samples_by_file()
    params = flatten_params(init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=3))

    def shift(labels: Tensor, num_classes: int) -> Tensor:
        return (labels + 1) % num_classes

    shifted = compute_file_updates(config, TRAIN, 2, samples, params, poison_labels=shift)
    flipped = compute_file_updates(
        config, TRAIN, 2, samples, params, poison_labels=lambda y, c: c - 1 - y
    )

    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    load_flat_(model, params)
    for f, rows in samples.items():
        idx = torch.tensor(rows)
        expected = compute_update(
            model,
            TRAIN.x[idx],
            (TRAIN.y[idx] + 1) % 10,
            seed=derive_seed(config.seed, 2, f),
            local_steps=config.training.local_steps,
            lr=config.training.local_lr,
        )
        assert torch.equal(shifted[f], expected)
        assert not torch.equal(shifted[f], flipped[f])
