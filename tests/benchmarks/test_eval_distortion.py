"""eval_distortion.py: one round decided as the coordinator decides a run's first."""

from __future__ import annotations

from benchmarks import eval_distortion
from phalanx.assignment import make_assignment
from phalanx.attacks import select_adversaries


def _round(
    scheme: str, q: int, strategy: str, mode: str, rule: eval_distortion.Rule
) -> tuple[float, float, float]:
    assignment = make_assignment(scheme, eval_distortion.K, eval_distortion.R)
    adversaries = select_adversaries(assignment, q, mode=mode, seed=0)  # type: ignore[arg-type]
    return eval_distortion.one_round(assignment, adversaries, strategy, 0, rule)


def test_by_default_two_colluders_in_a_group_distort_nothing_and_are_not_flagged() -> None:
    # They outvote the group's honest third worker: no proof in one round, the file dropped.
    assert _round("groups", 2, "only_majorities", "strong", "default") == (0.0, 1.0, 0.0)


def test_the_aspis_rule_gives_them_the_group_and_flags_the_honest_worker() -> None:
    distorted, precision, _ = _round("groups", 2, "only_majorities", "strong", "aspis")
    assert distorted == 0.2 and precision == 0.0


def test_a_weak_attacker_on_a_design_is_proven_in_its_first_round() -> None:
    distorted, precision, recall = _round("bibd", 3, "all", "weak", "default")
    assert (distorted, precision, recall) == (0.0, 1.0, 1.0)
