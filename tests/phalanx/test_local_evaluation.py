"""A client's local test split and its evaluation of the global model on it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from phalanx.data import load_dataset, load_digits
from phalanx.data_mode import LocalTrainingConfig
from phalanx.local_evaluation import (
    NoTestSplitError,
    client_split,
    evaluate_locally,
    held_out_size,
    local_split,
    split_seed,
    split_sizes,
)
from phalanx.local_training import ModelDataMismatchError
from phalanx.nets import build_model, flatten_params
from phalanx.training import evaluate


@given(st.integers(0, 10_000), st.floats(0.01, 0.99))
def test_the_test_split_holds_the_rounded_share_and_leaves_one_to_train(
    n: int, fraction: float
) -> None:
    held = held_out_size(n, fraction)
    if n < 2:
        assert held == 0
    else:
        assert 1 <= held <= n - 1
        assert held == min(n - 1, max(1, int(n * fraction + 0.5)))
    assert split_sizes(n, fraction) == (n - held, held)
    assert split_sizes(n, None) == (n, 0)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, float("nan")])
def test_a_fraction_outside_the_open_unit_interval_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        held_out_size(10, fraction)


def test_the_split_is_seeded_disjoint_and_covers_the_data() -> None:
    data = load_dataset("digits", "train").subset(torch.arange(50))
    first = local_split(data, 0.2, seed=split_seed(7, 3))
    again = local_split(data, 0.2, seed=split_seed(7, 3))
    other = local_split(data, 0.2, seed=split_seed(7, 4))

    assert first.test is not None and again.test is not None and other.test is not None
    assert (len(first.train), len(first.test)) == (40, 10)
    assert torch.equal(first.test.x, again.test.x) and torch.equal(first.train.y, again.train.y)
    assert not torch.equal(first.test.x, other.test.x)
    rows = torch.cat([first.train.x, first.test.x]).flatten(1)
    assert torch.unique(rows, dim=0).shape[0] == torch.unique(data.x.flatten(1), dim=0).shape[0]


def test_without_a_fraction_or_with_one_sample_nothing_is_held_out() -> None:
    data = load_dataset("digits", "train").subset(torch.arange(30))
    assert local_split(data, None, seed=1).test is None
    one = data.subset(torch.arange(1))
    split = local_split(one, 0.5, seed=1)
    assert split.test is None and len(split.train) == 1


def test_local_evaluation_is_the_models_loss_and_accuracy_on_the_test_split() -> None:
    data = load_dataset("digits", "train").subset(torch.arange(100))
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    params = flatten_params(model)
    split = local_split(data, 0.25, seed=5)
    assert split.test is not None

    measured = evaluate_locally(model, params, split.test)

    loss, accuracy = evaluate(model, split.test)
    assert (measured.loss, measured.accuracy, measured.num_samples) == (loss, accuracy, 25)


def test_a_client_without_a_test_split_or_with_mismatched_data_says_so() -> None:
    data = load_dataset("digits", "train").subset(torch.arange(20))
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    with pytest.raises(NoTestSplitError):
        evaluate_locally(model, flatten_params(model), None)
    wide = build_model("mlp", in_channels=1, image_size=12, num_classes=10)
    with pytest.raises(ModelDataMismatchError):
        evaluate_locally(wide, flatten_params(wide), data)
    with pytest.raises(ValueError, match="values"):
        evaluate_locally(model, torch.zeros(3), data)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (lambda p: torch.full_like(p, float("nan")), "NaN or Inf"),
        (lambda p: p.reshape(1, -1), "1-D floating-point"),
        (lambda p: p.to(torch.int64), "1-D floating-point"),
        (lambda p: p.to(torch.complex64), "1-D floating-point"),
    ],
)
def test_weights_training_would_refuse_are_refused_by_evaluation_too(
    weights: Callable[[torch.Tensor], torch.Tensor], message: str
) -> None:
    # Red team: NaN weights gave a NaN loss that the coordinator refused as an
    # implausible report of the client's (a medium event against an honest client);
    # complex and integer weights were cast without a word; a (1, d) stack was said to
    # have "d values, the model d".
    data = load_dataset("digits", "train").subset(torch.arange(20))
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    with pytest.raises(ValueError, match=message):
        evaluate_locally(model, weights(flatten_params(model)), data)


def test_a_run_s_client_holds_out_its_test_split_only_while_it_evaluates() -> None:
    data = load_digits("train").subset(torch.arange(50))
    evaluating = LocalTrainingConfig(evaluate_every=1, test_fraction=0.2)
    silent = LocalTrainingConfig(evaluate_every=0)

    split = client_split(data, evaluating, run_seed=7, worker=3)
    whole = client_split(data, silent, run_seed=7, worker=3)

    expected = local_split(data, 0.2, seed=split_seed(7, 3))
    assert torch.equal(split.train.y, expected.train.y) and split.test is not None
    assert (len(split.train), len(split.test)) == (40, 10)
    assert whole.test is None and len(whole.train) == 50
    assert client_split(data, None, run_seed=7, worker=3).test is not None  # the defaults evaluate
