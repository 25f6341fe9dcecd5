from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional

from phalanx.data import ImageDataset, load_digits, round_batch, split_files
from phalanx.nets import flatten_params, init_model, load_flat_, model_digest, num_params
from phalanx.training import apply_update_, compute_update, derive_seed, evaluate


def digits_model(seed: int = 0) -> nn.Module:
    return init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=seed)


@pytest.fixture(scope="module")
def digits_train() -> ImageDataset:
    return load_digits("train")


@pytest.fixture(scope="module")
def digits_test() -> ImageDataset:
    return load_digits("test")


# --------------------------------------------------------------------------- derive_seed


def test_derive_seed_is_pinned_across_processes_and_versions() -> None:
    assert derive_seed(0, 0, 0) == 7935565315488613825
    assert derive_seed(1, 2, 3) == 9111192440319298473


def test_derive_seed_separates_runs_rounds_and_files() -> None:
    seeds = {derive_seed(s, r, f) for s in range(3) for r in range(3) for f in range(3)}
    assert len(seeds) == 27
    assert all(0 <= s < 2**63 for s in seeds)


def test_derive_seed_gives_a_negative_file_its_own_seed() -> None:
    assert derive_seed(0, 0, -1) not in {derive_seed(0, 0, 1), derive_seed(0, 0, 0)}
    assert 0 <= derive_seed(-3, 0, -1) < 2**63


# --------------------------------------------------------------------------- compute_update


def test_gradient_matches_the_closed_form_of_softmax_regression() -> None:
    generator = torch.Generator().manual_seed(0)
    model = nn.Linear(4, 3)
    x = torch.randn(6, 4, generator=generator)
    y = torch.tensor([0, 1, 2, 2, 1, 0])
    residual = torch.softmax(model(x), dim=1).detach() - functional.one_hot(y, 3).float()
    expected = torch.cat([(residual.T @ x / 6).reshape(-1), residual.mean(dim=0)])
    torch.testing.assert_close(compute_update(model, x, y, seed=0), expected)


def test_gradient_matches_torch_autograd_on_a_cnn(digits_train: ImageDataset) -> None:
    model = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    x, y = digits_train.x[:16], digits_train.y[:16]
    reference = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    loss = functional.cross_entropy(reference(x), y)
    grads = torch.autograd.grad(loss, list(reference.parameters()))
    expected = torch.cat([g.reshape(-1) for g in grads])
    update = compute_update(model, x, y, seed=0)
    assert update.dtype == torch.float32 and update.shape == (num_params(model),)
    torch.testing.assert_close(update, expected)


@pytest.mark.parametrize(("local_steps", "batch_size"), [(1, None), (3, 8)])
def test_compute_update_is_bit_identical_across_calls(
    digits_train: ImageDataset, local_steps: int, batch_size: int | None
) -> None:
    model = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    x, y = digits_train.x[:32], digits_train.y[:32]
    first = compute_update(model, x, y, seed=11, local_steps=local_steps, batch_size=batch_size)
    again = compute_update(model, x, y, seed=11, local_steps=local_steps, batch_size=batch_size)
    assert torch.equal(first, again)


def test_compute_update_leaves_the_model_and_global_rng_untouched(
    digits_train: ImageDataset,
) -> None:
    model = digits_model()
    model.eval()
    before = model_digest(model)
    torch.manual_seed(3)
    expected_draw = torch.rand(2)
    torch.manual_seed(3)
    compute_update(model, digits_train.x[:20], digits_train.y[:20], seed=1, local_steps=4, lr=0.5)
    assert torch.equal(torch.rand(2), expected_draw)
    assert model_digest(model) == before
    assert not model.training
    assert all(p.grad is None for p in model.parameters())


def test_compute_update_trains_in_training_mode_without_touching_buffers_or_flags() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(16, 8),
        torch.nn.BatchNorm1d(8),
        torch.nn.Dropout(0.5),
        torch.nn.Linear(8, 3),
    )
    model.eval()
    model[2].train()  # a mixed state must come back as it was
    x, y = torch.randn(6, 1, 4, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    running = model[2].running_mean.clone()
    first = compute_update(model, x, y, seed=9)
    assert torch.equal(model[2].running_mean, running)
    assert [m.training for m in model.modules()] == [False, False, False, True, False, False]
    assert torch.equal(compute_update(model, x, y, seed=9), first)
    # Dropout was on (training mode) and drew from the seed.
    assert not torch.equal(compute_update(model, x, y, seed=10), first)


def test_local_steps_delta_is_params_before_minus_params_after_sgd(
    digits_train: ImageDataset,
) -> None:
    model = digits_model()
    x, y = digits_train.x[:40], digits_train.y[:40]
    reference = digits_model()
    before = flatten_params(reference)
    optimiser = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        optimiser.zero_grad()
        loss = functional.cross_entropy(reference(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimiser.step()
    delta = compute_update(model, x, y, seed=0, local_steps=3, lr=0.1)
    torch.testing.assert_close(delta, before - flatten_params(reference))


def test_one_small_local_step_delta_is_lr_times_the_gradient(digits_train: ImageDataset) -> None:
    model = digits_model()
    x, y = digits_train.x[:40], digits_train.y[:40]
    gradient = compute_update(model, x, y, seed=0)
    delta = compute_update(model, x, y, seed=0, local_steps=2, lr=1e-4)
    torch.testing.assert_close(delta, 2e-4 * gradient, rtol=1e-2, atol=1e-7)


def test_minibatches_of_local_steps_come_from_the_seed(digits_train: ImageDataset) -> None:
    model = digits_model()
    x, y = digits_train.x[:64], digits_train.y[:64]
    a = compute_update(model, x, y, seed=1, local_steps=2, batch_size=8)
    b = compute_update(model, x, y, seed=2, local_steps=2, batch_size=8)
    assert not torch.equal(a, b)


def test_compute_update_rejects_inconsistent_arguments(digits_train: ImageDataset) -> None:
    model = digits_model()
    x, y = digits_train.x[:8], digits_train.y[:8]
    with pytest.raises(ValueError, match=r"pass batch_size=None"):
        compute_update(model, x, y, seed=0, batch_size=4)
    with pytest.raises(ValueError, match=r"batch_size must be in 1..8"):
        compute_update(model, x, y, seed=0, local_steps=2, batch_size=9)
    with pytest.raises(ValueError, match=r"same non-zero number of samples"):
        compute_update(model, x, y[:7], seed=0)
    with pytest.raises(ValueError, match=r"y must be int64"):
        compute_update(model, x, y.to(torch.int32), seed=0)
    with pytest.raises(ValueError, match=r"local_steps must be >= 1"):
        compute_update(model, x, y, seed=0, local_steps=0)


_FRESH_PROCESS = textwrap.dedent(
    """
    import sys, torch
    torch.set_num_threads(int(sys.argv[1]))
    from phalanx.data import load_digits
    from phalanx.nets import init_model, model_digest
    from phalanx.training import compute_update
    data = load_digits("train")
    model = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    x, y = data.x[:48], data.y[:48]
    print(model_digest(compute_update(model, x, y, seed=5)))
    print(model_digest(compute_update(model, x, y, seed=5, local_steps=3, batch_size=16)))
    """
)


def test_compute_update_is_bit_identical_in_a_fresh_process(digits_train: ImageDataset) -> None:
    threads = torch.get_num_threads()
    result = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, str(threads)],
        capture_output=True,
        text=True,
        check=True,
    )
    model = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=0)
    x, y = digits_train.x[:48], digits_train.y[:48]
    expected = [
        model_digest(compute_update(model, x, y, seed=5)),
        model_digest(compute_update(model, x, y, seed=5, local_steps=3, batch_size=16)),
    ]
    assert result.stdout.split() == expected


# --------------------------------------------------------------------------- evaluate and training


def test_evaluate_matches_a_direct_computation_and_restores_train_mode(
    digits_test: ImageDataset,
) -> None:
    model = digits_model()
    model.train()
    loss, accuracy = evaluate(model, digits_test, batch_size=100)
    logits = model(digits_test.x).detach()
    assert loss == pytest.approx(float(functional.cross_entropy(logits, digits_test.y)), rel=1e-5)
    assert accuracy == pytest.approx(float((logits.argmax(1) == digits_test.y).float().mean()))
    assert model.training


def test_apply_update_subtracts_lr_times_the_update() -> None:
    model = nn.Linear(2, 1)
    load_flat_(model, torch.tensor([1.0, 2.0, 3.0]))
    apply_update_(model, torch.tensor([1.0, -1.0, 0.0]), lr=0.5)
    assert flatten_params(model).tolist() == [0.5, 2.5, 3.0]


def test_federated_sgd_on_digits_learns_to_classify(
    digits_train: ImageDataset, digits_test: ImageDataset
) -> None:
    model = digits_model(seed=0)
    _, initial_accuracy = evaluate(model, digits_test)
    for round in range(40):
        batch = round_batch(len(digits_train), 128, seed=0, round=round)
        updates = [
            compute_update(
                model, digits_train.x[f], digits_train.y[f], seed=derive_seed(0, round, i)
            )
            for i, f in enumerate(split_files(batch, 2))
        ]
        apply_update_(model, torch.stack(updates).mean(dim=0), lr=0.5)
    _, accuracy = evaluate(model, digits_test)
    assert initial_accuracy < 0.3
    assert accuracy > 0.9
