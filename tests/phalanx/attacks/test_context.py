"""What an attack knows: the file's holders, its fellow adversaries, and two kinds of randomness."""

from __future__ import annotations

import re

import pytest
import torch

from phalanx.attacks import AttackContext, forged_update


def context(**fields: object) -> AttackContext:
    base: dict[str, object] = {"round": 3, "file": 5, "worker": 2, "num_workers": 7}
    return AttackContext(num_byzantine=2, **(base | fields))  # type: ignore[arg-type]


def draw(ctx: AttackContext, *, run_wide: bool) -> torch.Tensor:
    return torch.randn(4, generator=ctx.run_generator() if run_wide else ctx.generator())


def test_the_run_generator_draws_the_same_numbers_in_every_round_file_and_worker() -> None:
    first = draw(context(seed=9), run_wide=True)
    for other in (context(seed=9, round=8), context(seed=9, file=0), context(seed=9, worker=6)):
        assert torch.equal(draw(other, run_wide=True), first)
    assert not torch.equal(draw(context(seed=10), run_wide=True), first)
    # The per-file generator differs from it, and from round to round.
    assert not torch.equal(draw(context(seed=9), run_wide=False), first)
    assert not torch.equal(
        draw(context(seed=9, round=4), run_wide=False), draw(context(seed=9), run_wide=False)
    )


@pytest.mark.parametrize(
    ("holders", "fellows", "majority"),
    [((1, 2, 4), {2, 4}, True), ((1, 2, 4), {2}, False), ((2, 4), {2}, False), ((), set(), False)],
)
def test_majority_says_whether_the_fellows_outnumber_the_honest_holders(
    holders: tuple[int, ...], fellows: set[int], majority: bool
) -> None:
    ctx = context(holders=holders, fellows=frozenset(fellows) if holders else frozenset())
    assert ctx.majority is majority


@pytest.mark.parametrize(
    ("holders", "fellows", "message"),
    [
        ((1, 4), frozenset(), "not among the holders"),
        ((1, 2, 4), frozenset({4}), "the worker among them"),
        ((1, 2, 4), frozenset({2, 6}), "fellows must be holders"),
        ((), frozenset({2}), "fellows must be holders"),
    ],
)
def test_holders_and_fellows_that_contradict_each_other_are_refused(
    holders: tuple[int, ...], fellows: frozenset[int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        context(holders=holders, fellows=fellows)


class FakeHostileAttack:
    """A test double of a plug-in attack that returns whatever it was built with."""

    name = "fake_hostile"

    def __init__(self, output: object) -> None:
        self.output = output

    def __call__(self, honest: torch.Tensor, ctx: AttackContext) -> torch.Tensor:
        return self.output  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("output", "got"),
    [
        ([1.0, 2.0, 3.0], "got list"),
        (torch.zeros(2), "got torch.float32 (2,)"),
        (torch.zeros(1, 3), "got torch.float32 (1, 3)"),
        (torch.zeros(3, dtype=torch.int64), "got torch.int64 (3,)"),
        (torch.zeros(3, dtype=torch.bool), "got torch.bool (3,)"),
    ],
)
def test_a_plug_in_s_forged_update_that_is_not_a_float_of_the_honest_shape_is_refused(
    output: object, got: str
) -> None:
    # Red team: a list failed inside the encoder ('list' object has no attribute
    # 'detach'), a shorter vector went out as a reply of the wrong length.
    refused = f"'fake_hostile' must return a float update shaped (3,), {got}"
    with pytest.raises(ValueError, match=re.escape(refused)):
        forged_update(FakeHostileAttack(output), torch.ones(3), context())


def test_a_forged_update_may_be_non_finite_and_is_cast_to_the_honest_dtype() -> None:
    sent = forged_update(
        FakeHostileAttack(torch.full((3,), float("nan"))), torch.ones(3), context()
    )
    assert bool(sent.isnan().all())
    wide = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    cast = forged_update(FakeHostileAttack(wide), torch.ones(3), context())
    assert cast.dtype == torch.float32 and not cast.requires_grad
