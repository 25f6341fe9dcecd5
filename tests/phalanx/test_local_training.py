"""Local training: a pure, seeded function of the global model and the client's data."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from phalanx.attacks import LabelFlip
from phalanx.data import ImageDataset, load_digits
from phalanx.data_mode import LocalTrainingConfig
from phalanx.local_training import (
    LocalUpdate,
    ModelDataMismatchError,
    check_model_fits,
    train_locally,
)
from phalanx.nets import flatten_params, init_model, load_flat_
from phalanx.partitions import dirichlet_partition
from phalanx.training import evaluate


def digits_model(seed: int = 0, *, num_classes: int = 10, name: Any = "mlp") -> nn.Module:
    return init_model(name, in_channels=1, image_size=8, num_classes=num_classes, seed=seed)


@pytest.fixture(scope="module")
def digits_train() -> ImageDataset:
    return load_digits("train")


@pytest.fixture(scope="module")
def client_data(digits_train: ImageDataset) -> ImageDataset:
    """One client's share of a Dirichlet(0.5) partition of digits over 8 clients."""
    partition = dirichlet_partition(digits_train.y.numpy(), 8, alpha=0.5, seed=0)
    return digits_train.subset(torch.from_numpy(partition[0]))


def train(model: nn.Module, data: ImageDataset, seed: int = 0, **settings: Any) -> LocalUpdate:
    return train_locally(
        model, flatten_params(model), data, LocalTrainingConfig(**settings), seed=seed
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"optimizer": "sgd", "lr": 0.05},
        {"optimizer": "momentum", "lr": 0.05, "momentum": 0.5},
        {"optimizer": "adam", "lr": 0.01, "steps": 7},
    ],
)
def test_equal_inputs_give_bit_identical_updates_and_the_seed_matters(
    client_data: ImageDataset, settings: dict[str, Any]
) -> None:
    model = digits_model()
    first = train(model, client_data, seed=1, **settings)
    again = train(model, client_data, seed=1, **settings)
    other = train(model, client_data, seed=2, **settings)

    assert torch.equal(first.update, again.update)
    assert not torch.equal(first.update, other.update)
    assert first.update.dtype == torch.float32
    assert first.num_samples == len(client_data)


def test_the_callers_model_and_torchs_random_state_are_left_as_they_were(
    client_data: ImageDataset,
) -> None:
    model = digits_model()
    model.eval()
    before = flatten_params(model).clone()
    state = torch.get_rng_state()

    train(model, client_data, epochs=2)

    assert torch.equal(flatten_params(model), before)
    assert not model.training
    assert torch.equal(torch.get_rng_state(), state)


def test_subtracting_the_update_gives_the_locally_trained_model_which_fits_its_data_better(
    client_data: ImageDataset,
) -> None:
    model = digits_model()
    loss_before, _ = evaluate(model, client_data)

    result = train(model, client_data, epochs=5, lr=0.1, batch_size=16)
    trained = load_flat_(digits_model(), flatten_params(model) - result.update)
    loss_after, accuracy = evaluate(trained, client_data)

    assert loss_after < 0.5 * loss_before
    assert accuracy > 0.8


def test_an_epoch_is_ceil_n_over_batch_steps_and_steps_count_exactly(
    client_data: ImageDataset,
) -> None:
    n = len(client_data)
    model = digits_model()

    assert train(model, client_data, batch_size=32).steps == -(-n // 32)
    assert train(model, client_data, batch_size=32, epochs=3).steps == 3 * -(-n // 32)
    assert train(model, client_data, batch_size=32, steps=5).steps == 5
    assert train(model, client_data, batch_size=10 * n).steps == 1


def test_one_full_batch_sgd_step_is_lr_times_the_gradient(client_data: ImageDataset) -> None:
    model = digits_model()
    n = len(client_data)
    result = train(model, client_data, batch_size=n, steps=1, lr=0.1)

    model.zero_grad()
    nn.functional.cross_entropy(model(client_data.x), client_data.y).backward()  # type: ignore[no-untyped-call]
    gradient = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(result.update, 0.1 * gradient, rtol=1e-4, atol=1e-7)


def test_training_starts_from_params_not_from_the_models_own_weights(
    client_data: ImageDataset,
) -> None:
    start = flatten_params(digits_model(seed=1))
    settings = LocalTrainingConfig(steps=3)

    from_other = train_locally(digits_model(seed=0), start, client_data, settings, seed=0)
    from_same = train_locally(digits_model(seed=1), start, client_data, settings, seed=0)

    assert torch.equal(from_other.update, from_same.update)


# --------------------------------------------------------------------------- mismatches


def test_a_model_for_other_images_is_a_mismatch_naming_the_data(
    client_data: ImageDataset,
) -> None:
    model = init_model("mlp", in_channels=1, image_size=28, num_classes=10, seed=0)

    with pytest.raises(
        ModelDataMismatchError, match=r"digits/train: the model does not take its 1x8x8"
    ):
        train(model, client_data)


def test_a_cnn_for_other_channels_is_a_mismatch(client_data: ImageDataset) -> None:
    model = init_model("cnn", in_channels=3, image_size=8, num_classes=10, seed=0)

    with pytest.raises(ModelDataMismatchError, match="does not take its 1x8x8 images"):
        check_model_fits(model, client_data)


def test_a_model_with_fewer_outputs_than_the_data_has_classes_is_a_mismatch(
    client_data: ImageDataset,
) -> None:
    with pytest.raises(
        ModelDataMismatchError, match="the data has 10 classes but the model only 5"
    ):
        train(digits_model(num_classes=5), client_data)


def test_a_model_whose_output_is_not_logits_per_image_is_a_mismatch(
    client_data: ImageDataset,
) -> None:
    model = nn.Sequential(nn.Flatten(0), nn.Linear(64, 10))

    with pytest.raises(ModelDataMismatchError, match=r"maps one 1x8x8 image to \(10,\)"):
        check_model_fits(model, client_data)


def test_a_mismatch_is_a_value_error_and_a_fitting_model_passes(client_data: ImageDataset) -> None:
    assert issubclass(ModelDataMismatchError, ValueError)
    check_model_fits(digits_model(num_classes=12), client_data)


# --------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (torch.zeros(3), "params has 3 values"),
        (torch.zeros(2, 2), "1-D floating-point"),
        (torch.zeros(10, dtype=torch.int64), "1-D floating-point"),
        ([0.0] * 10, "1-D floating-point"),
    ],
)
def test_malformed_params_are_refused(client_data: ImageDataset, params: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        train_locally(digits_model(), params, client_data, LocalTrainingConfig(), seed=0)


def test_non_finite_params_are_refused(client_data: ImageDataset) -> None:
    model = digits_model()
    params = flatten_params(model)
    params[3] = float("nan")

    with pytest.raises(ValueError, match="params hold NaN or Inf"):
        train_locally(model, params, client_data, LocalTrainingConfig(), seed=0)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, True])
def test_a_seed_outside_0_to_2_63_is_refused(client_data: ImageDataset, seed: Any) -> None:
    model = digits_model()
    with pytest.raises(ValueError, match="seed must be a whole number"):
        train_locally(model, flatten_params(model), client_data, LocalTrainingConfig(), seed=seed)


def test_poisoned_labels_train_as_the_same_data_relabelled_would(
    client_data: ImageDataset,
) -> None:
    model = digits_model()
    flip = LabelFlip()
    relabelled = ImageDataset(
        x=client_data.x, y=9 - client_data.y, num_classes=10, name=client_data.name
    )

    poisoned = train_locally(
        model,
        flatten_params(model),
        client_data,
        LocalTrainingConfig(),
        seed=3,
        poison_labels=flip.poison_labels,
    )
    by_hand = train(model, relabelled, seed=3)
    honest = train(model, client_data, seed=3)

    assert torch.equal(poisoned.update, by_hand.update)
    assert not torch.equal(poisoned.update, honest.update)
    assert poisoned.num_samples == honest.num_samples == len(client_data)
    assert torch.equal(client_data.y, 9 - relabelled.y)  # the caller's labels are untouched


def test_a_poison_that_returns_no_labels_of_the_data_is_refused_before_training(
    client_data: ImageDataset,
) -> None:
    model = digits_model()
    with pytest.raises(ValueError, match=r"labels outside 0\.\.9"):
        train_locally(
            model,
            flatten_params(model),
            client_data,
            LocalTrainingConfig(),
            seed=0,
            poison_labels=lambda y, c: y + c,
        )
