"""What adaptive_k and the bandit carry across rounds: decisions, learning, checkpoints."""

from __future__ import annotations

import pytest
import torch

from phalanx.assignment import Assignment
from phalanx.collect.config import CollectConfig
from phalanx.collect.pieces import Collection, Piece
from phalanx.policy_memory import PolicyMemory, response_times


def closed(times: dict[int, float], *, at: float, missing: tuple[int, ...] = ()) -> Collection:
    pieces = [Piece(w, 0, t, "d") for w, t in sorted(times.items())]
    kept = tuple(p for p in pieces if p.time <= at)
    late = tuple(p for p in pieces if p.time > at)
    return Collection(kept, late, tuple((w, 0) for w in missing), at, "policy")


def bandit(k: int = 2, workers: int = 4, exploration: float = 0.0) -> PolicyMemory:
    config = CollectConfig(policy="bandit", k=k, exploration=exploration)
    return PolicyMemory.start(config, workers)


def adaptive(k: int = 2, burn_in: int = 0) -> PolicyMemory:
    return PolicyMemory.start(CollectConfig(policy="adaptive_k", k=k, burn_in=burn_in), 5)


def test_a_response_is_the_last_piece_kept_or_late_and_a_silent_worker_the_close() -> None:
    got = response_times(closed({0: 1.0, 1: 4.0}, at=2.0, missing=(2,)), {0, 1, 2})
    assert got == {0: 1.0, 1: 4.0, 2: 2.0}


def test_a_worker_not_given_work_is_not_observed_whatever_arrives_from_it() -> None:
    assert response_times(closed({0: 1.0, 3: 0.5}, at=2.0), {0}) == {0: 1.0}


def test_a_stateless_policy_gives_work_to_every_candidate_and_carries_nothing() -> None:
    memory = PolicyMemory.start(CollectConfig(policy="fastest_k", k=2), 4)
    assert memory.dispatch([3, 1, 0]) == {0, 1, 3}
    memory.observe(closed({0: 1.0}, at=1.0), {0, 1, 3}, torch.ones(3))
    assert memory.round_options() == {} and memory.metrics() == {} and memory.state() == {}
    assert not memory.follows_updates


def test_the_bandit_tries_every_worker_then_keeps_to_the_fastest() -> None:
    memory = bandit()
    assert memory.dispatch(range(4)) == {0, 1}  # nothing learned: lowest ids first
    memory.observe(closed({0: 9.0, 1: 1.0}, at=9.0), {0, 1}, None)
    assert memory.dispatch(range(4)) == {2, 3}  # the unobserved come before the observed
    memory.observe(closed({2: 1.5, 3: 2.0}, at=2.0), {2, 3}, None)
    assert memory.dispatch(range(4)) == {1, 2}
    assert memory.dispatch([0, 3]) == {0, 3}  # only among the candidates (e.g. not benched)


def test_a_chosen_worker_that_never_replies_is_learned_as_slow() -> None:
    memory = bandit(k=1, workers=2)
    memory.observe(closed({}, at=5.0, missing=(0,)), {0}, None)
    memory.observe(closed({1: 1.0}, at=1.0), {1}, None)
    assert memory.dispatch(range(2)) == {1}


def test_adaptive_k_grows_when_successive_updates_turn_against_each_other() -> None:
    memory = adaptive(k=2)
    assert memory.follows_updates and memory.round_options() == {"k": 2}
    memory.observe(closed({}, at=1.0), {0, 1}, torch.tensor([1.0, 0.0]))
    assert memory.round_options() == {"k": 2}  # one update: nothing to compare yet
    memory.observe(closed({}, at=1.0), {0, 1}, torch.tensor([-1.0, 0.0]))
    assert memory.round_options() == {"k": 3} and memory.metrics() == {"collect_k": 3.0}


def test_adaptive_k_holds_while_updates_travel_one_way_or_none_is_applied() -> None:
    memory = adaptive(k=2)
    for update in (torch.tensor([1.0, 0.5]), None, torch.tensor([0.8, 0.4]), None):
        memory.observe(closed({}, at=1.0), {0, 1}, update)
    assert memory.round_options() == {"k": 2}
    assert memory.state()["adaptive"] == {"k": 2, "pflug_sum": pytest.approx(1.0), "rounds": 1}


def test_adaptive_k_never_asks_for_more_workers_than_the_run_has() -> None:
    memory = adaptive(k=5)
    memory.observe(closed({}, at=1.0), {0}, torch.tensor([1.0]))
    memory.observe(closed({}, at=1.0), {0}, torch.tensor([-1.0]))
    assert memory.round_options() == {"k": 5}


@pytest.mark.parametrize("make", [bandit, adaptive])
def test_a_restored_memory_decides_as_the_one_it_was_saved_from(make: object) -> None:
    memory = make()  # type: ignore[operator]
    for step, update in enumerate((torch.tensor([1.0, 2.0]), torch.tensor([-1.0, 0.5]))):
        memory.observe(closed({0: 3.0 + step, 1: 1.0}, at=4.0), {0, 1}, update)
    again = make()  # type: ignore[operator]
    again.restore(memory.state())
    assert again.state().keys() == memory.state().keys()
    assert again.dispatch(range(4)) == memory.dispatch(range(4))
    assert again.round_options() == memory.round_options()
    update = torch.tensor([0.25, -3.0])
    for m in (memory, again):
        m.observe(closed({1: 2.0}, at=2.0), {1}, update)
    assert again.round_options() == memory.round_options()
    assert again.dispatch(range(4)) == memory.dispatch(range(4))


def test_a_checkpoint_of_another_federation_is_refused() -> None:
    state = bandit(workers=4).state()
    with pytest.raises(ValueError, match="knows 4 workers, the run has 6"):
        bandit(workers=6).restore(state)


def test_an_empty_state_leaves_a_fresh_memory_as_it_was() -> None:
    memory = adaptive()
    memory.restore({})
    assert memory.state() == {"adaptive": {"k": 2, "pflug_sum": 0.0, "rounds": 0}}


def lazy(dim: int = 2) -> PolicyMemory:
    """Lazy G-CADA over 2 groups (files 0 and 1) of 2 workers each, a model of ``dim``."""
    config = CollectConfig(policy="group_fastest", group_selection="lazy", max_staleness=2)
    return PolicyMemory.start(config, 4, num_groups=2, dim=dim)


def test_lazy_groups_give_work_only_to_the_selected_groups_and_close_on_them() -> None:
    memory = lazy()
    pairs = Assignment(4, ((0, 1), (2, 3)))
    assert memory.dispatch(range(4), pairs) == frozenset(range(4))  # nothing learned yet
    for update in ({0: torch.zeros(2), 1: torch.ones(2)}, {0: 3 * torch.ones(2), 1: torch.ones(2)}):
        memory.observe(closed({0: 1.0}, at=1.0), {0}, torch.ones(2), update)
    # Threshold 1.0 / 2 * (2 + 2) = 2: group 0 moved by 18, group 1 by 0: only group 0 waited.
    assert memory.dispatch(range(4), pairs) == frozenset({0, 1})
    assert memory.round_options() == {"groups": (0,)}
    assert sorted(memory.fill({0: torch.ones(2)})) == [0, 1]
    with pytest.raises(ValueError, match="needs the round's assignment"):
        memory.dispatch(range(4))


def test_a_lazy_checkpoint_of_another_model_is_refused_in_words() -> None:
    saved = lazy(dim=2)
    saved.observe(closed({0: 1.0}, at=1.0), {0}, torch.ones(2), {0: torch.ones(2)})
    with pytest.raises(ValueError, match=r"collect state cannot be restored: .*of 3 parameters"):
        lazy(dim=3).restore(saved.state())
