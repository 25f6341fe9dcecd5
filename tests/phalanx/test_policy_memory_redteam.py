"""Red team of what a collection policy carries across rounds and into checkpoints.

A checkpoint that is not what :meth:`PolicyMemory.state` writes (a field missing or of
another type, NaN, a budget of zero or below) is refused with a ``ValueError`` at
restore, as its docstring says. Before the fix some raised ``KeyError``,
``TypeError``, ``AttributeError`` or ``OverflowError``, and a NaN or negative budget,
a NaN last update or a negative measured overhead were taken up in silence, to turn
DropCompute off unnoticed or fail the run rounds later.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from phalanx.collect.config import CollectConfig
from phalanx.collect.pieces import Collection, Piece
from phalanx.policy_memory import PolicyMemory

NAN, INF = float("nan"), float("inf")
ADAPTIVE = CollectConfig(policy="adaptive_k", k=2, burn_in=0)
BANDIT = CollectConfig(policy="bandit", k=2)
DROP = CollectConfig(drop_compute=True)
STEP = {"k": 2, "pflug_sum": 0.0, "rounds": 0}
LEARNED = {"counts": [1, 1, 1], "means": [1.0, 2.0, 3.0], "rounds": 1, "scale": 3.0}

HOSTILE: list[tuple[CollectConfig, dict[str, Any]]] = [
    (ADAPTIVE, {"adaptive": {**STEP, "k": INF}}),
    (ADAPTIVE, {"adaptive": {**STEP, "k": NAN}}),
    (ADAPTIVE, {"adaptive": {**STEP, "k": 0}}),
    (ADAPTIVE, {"adaptive": {**STEP, "pflug_sum": NAN}}),
    (ADAPTIVE, {"adaptive": {"k": 2}}),
    (ADAPTIVE, {"adaptive": "k=2"}),
    (ADAPTIVE, {"adaptive": STEP, "last_update": torch.tensor([1.0, NAN])}),
    (ADAPTIVE, {"adaptive": STEP, "last_update": torch.tensor([INF, 0.0])}),
    (ADAPTIVE, {"adaptive": STEP, "last_update": [1.0, 2.0]}),
    (BANDIT, {"bandit": {**LEARNED, "means": [1.0, NAN, 3.0]}}),
    (BANDIT, {"bandit": {**LEARNED, "means": [1.0]}}),
    (BANDIT, {"bandit": {**LEARNED, "counts": [1.0, 1, 1]}}),
    (BANDIT, {"bandit": {**LEARNED, "counts": [-1, 1, 1]}}),
    (BANDIT, {"bandit": {**LEARNED, "scale": INF}}),
    (BANDIT, {"bandit": {k: v for k, v in LEARNED.items() if k != "scale"}}),
    (BANDIT, {"bandit": [1, 2, 3]}),
    (DROP, {"drop_compute": {"budget_s": NAN, "measured": []}}),
    (DROP, {"drop_compute": {"budget_s": INF, "measured": []}}),
    (DROP, {"drop_compute": {"budget_s": -5.0, "measured": []}}),
    (DROP, {"drop_compute": {"budget_s": 0.0, "measured": []}}),
    (DROP, {"drop_compute": {"budget_s": "soon", "measured": []}}),
    (DROP, {"drop_compute": {"budget_s": None, "measured": [[[[NAN]], 0.1]]}}),
    (DROP, {"drop_compute": {"budget_s": None, "measured": [[[[1.0, -2.0]], 0.1]]}}),
    (DROP, {"drop_compute": {"budget_s": None, "measured": [[[[1.0]], -1.0]]}}),
    (DROP, {"drop_compute": {"budget_s": None, "measured": [[[[1.0]]]]}}),
    (DROP, {"drop_compute": {"budget_s": None}}),
    (DROP, {"drop_compute": None}),
]


@pytest.mark.parametrize(("config", "state"), HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_a_checkpoint_state_that_is_not_what_state_writes_is_a_value_error(
    config: CollectConfig, state: dict[str, Any]
) -> None:
    memory = PolicyMemory.start(config, 3)
    with pytest.raises(ValueError, match="the checkpoint's collect state cannot be restored"):
        memory.restore(state)


def test_a_checkpoint_of_a_bandit_over_other_workers_is_refused_naming_both() -> None:
    memory = PolicyMemory.start(BANDIT, 4)
    with pytest.raises(ValueError, match="knows 3 workers, the run has 4"):
        memory.restore({"bandit": LEARNED})


def test_what_state_writes_restores_to_the_same_decisions() -> None:
    for config in (ADAPTIVE, BANDIT, DROP):
        memory = PolicyMemory.start(config, 3)
        collection = Collection((Piece(0, 0, 1.0, "d"),), (), ((1, 0),), 2.0, "policy")
        memory.observe(collection, {0, 1}, torch.ones(4))
        memory.observe(collection, {0, 1}, -torch.ones(4))
        memory.measure([[0.5, 1.0], [2.0]], 0.25)
        again = PolicyMemory.start(config, 3)
        again.restore(memory.state())
        assert again.state().keys() == memory.state().keys()
        assert again.round_options() == memory.round_options()
        assert again.dispatch(range(3)) == memory.dispatch(range(3))
        assert again.metrics() == memory.metrics()


def test_claims_of_no_compute_alone_never_make_a_zero_budget_the_coordinator_cannot_send() -> None:
    # Deployed: the only measured worker answers at once, claiming 0 s for every file
    # (the others sent no claim, an older client, or none came). A budget of 0 s
    # failed the next round's tasks (Task refuses it as the host's bug): the run died.
    memory = PolicyMemory.start(CollectConfig(drop_compute=True, warmup_rounds=1), 3, claimed=True)
    memory.measure([[0.0, 0.0]], 0.0)
    assert memory.budget_s is None  # still measuring: no budget rather than one of 0 s
    memory.measure([[0.0, 0.0], [1.0, 2.0], [1.5, 2.5]], 0.1)
    assert memory.budget_s is not None and memory.budget_s >= 2.0
