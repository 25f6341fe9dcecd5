"""G-CADA's memory: what it waits for, what stands in for the rest, and its checkpoint."""

from __future__ import annotations

import pytest
import torch

from phalanx.group_memory import MOVES_WINDOW, LazyGroups


def two_rounds(lazy: LazyGroups) -> LazyGroups:
    """Groups 0 and 1 uploaded twice: group 0's update moved by 3, group 1's by 0.1."""
    lazy.learn({0: torch.zeros(2), 1: torch.ones(2), 2: torch.ones(2)}, move=1.0)
    lazy.learn({0: torch.tensor([3.0, 0.0]), 1: torch.tensor([1.1, 1.0])}, move=1.0)
    return lazy


def test_lazy_groups_wait_for_the_group_that_moved_and_any_without_two_updates() -> None:
    lazy = two_rounds(LazyGroups.fresh(4))
    # threshold 1.0 / 2 * (1 + 1) = 1: group 0 (9) is selected, group 1 (0.01) is not;
    # groups 2 and 3 lack two updates.
    assert lazy.select(c=1.0, max_staleness=5) == (0, 2, 3)
    assert lazy.staleness == [1, 1, 2, 3]


def test_a_group_left_out_stands_in_with_its_last_update_and_a_fresh_one_wins() -> None:
    lazy = two_rounds(LazyGroups.fresh(4))
    fresh = {0: torch.full((2,), 7.0)}

    filled = lazy.fill(fresh, selected=(0, 2, 3))

    assert sorted(filled) == [0, 1]  # group 2 was selected: no stale stand-in; 3 has none
    assert torch.equal(filled[0], fresh[0]) and torch.equal(filled[1], torch.tensor([1.1, 1.0]))


def test_the_model_moves_are_kept_for_the_last_window_of_rounds() -> None:
    lazy = LazyGroups.fresh(1)
    for i in range(MOVES_WINDOW + 5):
        lazy.learn({}, move=float(i))
    assert lazy.moves == [float(i) for i in range(5, MOVES_WINDOW + 5)]
    assert lazy.staleness == [1 + MOVES_WINDOW + 5]


def test_a_checkpointed_memory_selects_and_fills_as_the_one_it_was_saved_from() -> None:
    lazy = two_rounds(LazyGroups.fresh(4))
    restored = LazyGroups.restore(lazy.state(), 4, dim=2)

    assert restored.select(c=1.0, max_staleness=5) == lazy.select(c=1.0, max_staleness=5)
    assert restored.staleness == lazy.staleness and restored.moves == lazy.moves
    pairs = zip(restored.last + restored.previous, lazy.last + lazy.previous, strict=True)
    for mine, theirs in pairs:
        assert (mine is None and theirs is None) or torch.equal(mine, theirs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"staleness": [1, 1]}, "lazy groups are 2, the run has 4"),
        ({"staleness": [0, 1, 1, 1]}, "out of range"),
        ({"moves": [float("nan")]}, "out of range"),
        ({"moves": [-1.0]}, "out of range"),
        ({"updates": None}, "not the 5 of 2 parameters"),
        ({"updates": torch.zeros(5, 3)}, "not the 5 of 2 parameters"),
        ({"updates": torch.zeros(9, 2)}, "not the 5 of 2 parameters"),
        ({"updates": torch.full((5, 2), float("inf"))}, "not finite"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_refused(change: dict[str, object], message: str) -> None:
    state = {**two_rounds(LazyGroups.fresh(4)).state(), **change}
    with pytest.raises(ValueError, match=message):
        LazyGroups.restore(state, 4, dim=2)


def vouched_rounds() -> LazyGroups:
    """Groups 0 and 1 uploaded twice, unchanged; worker 3 alone vouched for group 0's."""
    lazy = LazyGroups.fresh(2)
    for _ in range(2):
        lazy.learn(
            {0: torch.full((2,), 5.0), 1: torch.ones(2)},
            move=1.0,
            supporters={0: (3,), 1: (4, 5)},
        )
    return lazy


def test_a_stale_update_stops_counting_once_every_worker_that_vouched_for_it_is_flagged() -> None:
    # Before the fix a group's last accepted update stood in for it until its staleness
    # ran out (up to max_staleness = 100,000 rounds), even after the only worker whose
    # replica it was had been flagged: a caught liar's update kept counting.
    lazy = vouched_rounds()
    assert lazy.select(c=1.0, max_staleness=50) == ()  # neither moved: both stand in
    lazy.forget({3, 4})
    # Group 0's update was worker 3's alone: gone, and group 0 is waited for again.
    # Group 1's is still vouched for by worker 5, who agreed with it.
    assert sorted(lazy.fill({}, selected=())) == [1]
    assert lazy.select(c=1.0, max_staleness=50) == (0,)
    lazy.forget({5})
    assert lazy.fill({}, selected=()) == {}
    assert lazy.select(c=1.0, max_staleness=50) == (0, 1)


def test_who_vouched_for_the_stale_updates_survives_a_checkpoint() -> None:
    restored = LazyGroups.restore(vouched_rounds().state(), 2, dim=2)
    restored.forget({3})
    assert sorted(restored.fill({}, selected=())) == [1]


@pytest.mark.parametrize(
    "vouched", [[[1]], [[1], "x"], [[1], [-2]], [[1], [True]], [[1], [1.5]], "ab"]
)
def test_a_checkpoint_whose_vouchers_are_not_workers_is_refused(vouched: object) -> None:
    state = {**vouched_rounds().state(), "vouched": vouched}
    with pytest.raises((ValueError, TypeError)):
        LazyGroups.restore(state, 2, dim=2)
