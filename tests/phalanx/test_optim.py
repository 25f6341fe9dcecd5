from __future__ import annotations

import copy
import sys

import pytest
import torch

from phalanx.optim import ServerOptimizer, prepare_in_background


@pytest.mark.parametrize("kind", ["sgd", "adam", "amsgrad"])
def test_a_finite_step_is_applied(kind: str) -> None:
    optimizer = ServerOptimizer(torch.zeros(4), kind=kind, lr=0.1)  # type: ignore[arg-type]
    assert optimizer.stays_finite(torch.ones(4))
    assert torch.equal(optimizer.params, torch.zeros(4))  # a trial changes nothing
    assert optimizer.step_if_finite(torch.ones(4))
    assert float(optimizer.params[0]) < 0.0


def test_adam_refuses_an_update_whose_square_overflows_and_keeps_its_state() -> None:
    optimizer = ServerOptimizer(torch.zeros(3), kind="adam", lr=0.1)
    optimizer.step(torch.ones(3))
    before = copy.deepcopy(optimizer.state_dict())
    huge = torch.full((3,), 1.0e30)  # finite, but its square leaves float32 in the second moment
    assert not optimizer.stays_finite(huge)
    assert not optimizer.step_if_finite(huge)
    after = optimizer.state_dict()
    assert torch.equal(after["params"], before["params"])
    state_before = before["optimizer"]["state"][0]
    state_after = after["optimizer"]["state"][0]
    for key in ("exp_avg", "exp_avg_sq", "step"):
        assert torch.equal(state_after[key], state_before[key])


def test_sgd_refuses_a_step_that_leaves_the_parameters_infinite() -> None:
    optimizer = ServerOptimizer(torch.full((2,), 3.0e38), kind="sgd", lr=1.0, momentum=0.0)
    assert not optimizer.step_if_finite(torch.full((2,), -3.0e38))
    assert torch.equal(optimizer.params, torch.full((2,), 3.0e38))


def test_a_scaled_learning_rate_steps_that_much_shorter_and_then_comes_back() -> None:
    opt = ServerOptimizer(torch.zeros(3), kind="sgd", lr=0.5, momentum=0.0)
    with opt.scaled_lr(0.25):
        opt.step(torch.ones(3))
        assert opt.state_dict()["optimizer"]["param_groups"][0]["lr"] == 0.125
    assert torch.allclose(opt.params, torch.full((3,), -0.125))
    assert opt.state_dict()["optimizer"]["param_groups"][0]["lr"] == 0.5
    with pytest.raises(RuntimeError), opt.scaled_lr(0.1):
        raise RuntimeError("a step failed")
    assert opt.optimizer.param_groups[0]["lr"] == 0.5


def test_a_refused_step_inside_a_scaled_block_still_restores_the_rate() -> None:
    opt = ServerOptimizer(torch.zeros(2), kind="adam", lr=1e-3)
    with opt.scaled_lr(0.5):
        assert not opt.step_if_finite(torch.tensor([float("inf"), 0.0]))
        assert opt.optimizer.param_groups[0]["lr"] == 5e-4
    assert opt.optimizer.param_groups[0]["lr"] == 1e-3


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf")])
def test_a_learning_rate_factor_must_be_finite_and_positive(factor: float) -> None:
    opt = ServerOptimizer(torch.zeros(2), kind="sgd", lr=0.1)
    with pytest.raises(ValueError, match="finite and > 0"), opt.scaled_lr(factor):
        pass


def test_the_torch_optimiser_is_built_when_first_used_not_with_the_coordinator() -> None:
    # torch imports torch._dynamo with a process's first optimiser: seconds that held a
    # run's first tasks back while its coordinator was built.
    opt = ServerOptimizer(torch.zeros(3), kind="adam", lr=0.1)
    assert "optimizer" not in vars(opt)
    opt.step(torch.ones(3))
    assert "optimizer" in vars(opt)
    assert opt.params.tolist() == pytest.approx([-0.1, -0.1, -0.1])


def test_an_unknown_optimiser_is_refused_at_once_not_when_first_used() -> None:
    with pytest.raises(ValueError, match="choose sgd, adam or amsgrad"):
        ServerOptimizer(torch.zeros(3), kind="rmsprop", lr=0.1)  # type: ignore[arg-type]


def test_preparing_in_background_imports_what_the_first_optimiser_needs() -> None:
    prepare_in_background().join(timeout=120)
    assert "torch._dynamo" in sys.modules
