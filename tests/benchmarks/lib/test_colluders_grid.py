"""The colluders' rows of eval_robustness.py (benchmarks/lib/colluders_*.py): pure helpers only."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks import eval_robustness
from benchmarks.lib import results
from benchmarks.lib.colluders_goals import accuracy_loss, colluder_goals, missed, seed_counts
from benchmarks.lib.colluders_grid import (
    COLLUDER_DEFENCES,
    DEFAULT_BOUND,
    Q_MAX,
    STRATEGY_ATTACK,
    ColluderCase,
    colluder_grid,
    quick_grid,
)
from benchmarks.lib.colluders_markdown import colluders_section
from benchmarks.lib.colluders_runs import (
    ColluderRow,
    derive,
    distorted_after,
    first_rounds,
    join_rows,
    merge_colluders,
    replay_proofs,
    round_distortion,
    rounds_until_flagged,
    split_rows,
)
from benchmarks.lib.results import Machine
from benchmarks.lib.robustness_grid import Settings
from benchmarks.lib.robustness_runs import Row
from phalanx.agreement_record import AgreementRecord, ConflictEdge
from phalanx.attacks import distortion_plan
from phalanx.plan import adversaries, round_assignment
from tests.support.reports import round_report

SETTINGS = Settings(rounds=20, model="mlp", eval_samples=1000, optimizer="adam", server_lr=0.005)
BIBD = next(d for d in COLLUDER_DEFENCES if d.scheme == "bibd")
HOST = Machine("x86_64", "", "x86_64", 2, "3.11.7", "Linux")


def test_rounds_until_flagged_is_the_first_round_by_which_every_adversary_was_flagged() -> None:
    assert rounds_until_flagged({1, 2}, [[], [1], [3], [2], []]) == 4
    assert rounds_until_flagged({1, 2}, [[1, 2]]) == 1


def test_rounds_until_flagged_is_none_when_one_adversary_never_is_or_there_is_none() -> None:
    assert rounds_until_flagged({1, 2}, [[1], [1], [3]]) is None
    assert rounds_until_flagged(set(), [[3]]) is None


def test_distorted_after_counts_only_the_rounds_after_the_deadline() -> None:
    assert distorted_after([5, 5, 0, 2], files=10, after=2) == pytest.approx(0.1)
    assert distorted_after([5, 5, 0, 2], files=10, after=0) == pytest.approx(0.3)
    assert distorted_after([5, 5], files=10, after=2) is None


def test_first_rounds_names_each_worker_at_its_first_round() -> None:
    assert first_rounds([[], [4, 1], [1, 2]]) == {4: 2, 1: 2, 2: 3}


# Three files; workers 0 and 1 collude and distort files 0 and 1.
FILES = ((0, 1, 2), (0, 1, 3), (2, 3, 4))
PLAN = {0: {0, 1}, 1: {0, 1}}
EVERYONE = range(5)


def test_a_tie_drops_the_disputed_files_and_nothing_distorted_gets_through() -> None:
    outcome = round_distortion(
        FILES, PLAN, replied=EVERYONE, excluded=(), suspects=(0, 1, 2, 3), dropped=(0, 1)
    )
    assert outcome.distorted == 0
    assert outcome.predicted_drops == (0, 1)


def test_proven_colluders_supply_nothing_and_their_files_keep_the_honest_value() -> None:
    outcome = round_distortion(
        FILES, PLAN, replied=EVERYONE, excluded=(0, 1), suspects=(), dropped=()
    )
    assert (outcome.distorted, outcome.predicted_drops) == (0, ())


def test_a_file_whose_suppliers_are_all_colluders_is_distorted_unless_dropped() -> None:
    # A unique clique holding the colluders flags the honest worker 2: file 0 is theirs.
    args: dict[str, Any] = {"replied": EVERYONE, "excluded": (2,), "suspects": ()}
    assert round_distortion(FILES, PLAN, **args, dropped=(1,)).distorted == 1
    assert round_distortion(FILES, PLAN, **args, dropped=(0, 1)).distorted == 0


def test_a_file_left_to_suspects_alone_is_predicted_dropped() -> None:
    outcome = round_distortion(
        FILES, PLAN, replied=EVERYONE, excluded=(0, 1), suspects=(2, 3), dropped=()
    )
    assert outcome.predicted_drops == (0, 1)


def test_a_file_nobody_answered_for_is_predicted_dropped() -> None:
    outcome = round_distortion(FILES, {}, replied=(0, 1), excluded=(), suspects=(), dropped=())
    assert outcome.predicted_drops == (2,)


def test_replayed_proofs_come_in_the_round_the_disputes_exceed_the_bound() -> None:
    # Worker 0 disputes with a new partner every round: at bound 2, three partners prove it.
    rounds = [[(0, 1)], [(0, 2)], [(3, 0)], [(0, 4)]]
    assert replay_proofs(rounds, bound=2) == [[], [], [0], []]
    assert replay_proofs(rounds, bound=3) == [[], [], [], [0]]


def test_a_case_runs_the_strong_colluders_with_relabelling_on_at_its_bound() -> None:
    case = ColluderCase(BIBD, "only_majorities", "reversed_gradient", 3, Q_MAX, 2026, 20)
    config = case.config(SETTINGS)
    assert config.assignment.relabel
    assert (config.assignment.scheme, config.data.samples_per_file) == ("bibd", 14)
    assert (config.attack.selection, config.attack.strategy) == ("strong", "only_majorities")
    assert config.detection.max_adversaries == Q_MAX == case.bound
    assert dataclasses.replace(case, max_adversaries=None).bound == DEFAULT_BOUND == 7


def test_a_case_without_attack_names_none() -> None:
    config = ColluderCase(BIBD, "-", "none", 0, None, 2026, 20).config(SETTINGS)
    assert (config.attack.name, config.attack.q, config.detection.max_adversaries) == (
        None,
        0,
        None,
    )


def test_the_grid_has_every_scheme_strategy_q_bound_and_seed_and_one_clean_run_each() -> None:
    cases = colluder_grid(COLLUDER_DEFENCES, (1, 2, 3, 4, 5), (2026, 2027, 2028), 20)
    assert len(cases) == 3 * 3 * (1 + 2 * 5 * 2)
    assert len({c.run_id for c in cases}) == len(cases)
    assert {c.defence.scheme for c in cases} == {"mols", "subsets", "bibd"}
    assert {(c.strategy, c.attack) for c in cases if c.q} == set(STRATEGY_ATTACK.items())
    assert {c.max_adversaries for c in cases if c.q} == {None, Q_MAX}
    subsets = next(d for d in COLLUDER_DEFENCES if d.scheme == "subsets")
    assert subsets.samples_per_file < BIBD.samples_per_file  # 455 files a round


def test_the_quick_grid_is_bibd_with_one_seed_and_q_two_and_three() -> None:
    cases = quick_grid()
    assert {c.defence.scheme for c in cases} == {"bibd"}
    assert {c.q for c in cases} == {0, 2, 3}
    assert len({c.seed for c in cases}) == 1
    assert len(cases) == 1 + 2 * 2 * 2


def _row(**fields: Any) -> ColluderRow:
    base: dict[str, Any] = {
        "scheme": "bibd",
        "defence": BIBD.name,
        "aggregator": "median",
        "strategy": "only_majorities",
        "attack": "reversed_gradient",
        "q": 2,
        "bound": 7,
        "bound_stated": False,
        "seed": 2026,
        "rounds": 4,
        "after": 2,
        "final_accuracy": 0.75,
        "precision": 1.0,
        "recall": 1.0,
        "rounds_to_flag_all": 2,
        "distorted_after": 0.0,
        "distorted_fraction": 0.0,
        "files": 35,
        "samples_per_file": 14,
        "adversaries": [1, 2],
        "flagged": [1, 2],
        "flagged_by_round": [[1], [2], [], []],
        "proven_by_round": [[1], [2], [], []],
        "lying_by_round": [[1, 2]] * 4,
        "distorted_by_round": [0, 0, 0, 0],
        "dropped_by_round": [3, 3, 0, 0],
        "consistent": True,
        "model_digest": "abc",
        "seconds": 1.0,
    }
    return ColluderRow(**{**base, **fields})


CLEAN = _row(
    q=0, strategy="-", attack="none", adversaries=[], flagged=[], flagged_by_round=[[]] * 4,
    rounds_to_flag_all=None, final_accuracy=0.76,
)  # fmt: skip


def test_an_adversary_that_never_lied_by_the_deadline_is_not_counted_as_missed() -> None:
    silent = _row(adversaries=[1, 2, 3], lying_by_round=[[1, 2], [1, 2], [3], [3]])
    assert silent.silent == [3]
    assert missed(silent) == []
    late = _row(flagged_by_round=[[1], [], [2], []])
    assert missed(late) == [2]


def test_the_goals_are_met_by_caught_colluders_and_not_by_an_honest_flag() -> None:
    good = colluder_goals([CLEAN, _row()])
    assert [g.met for g in good] == [True, True, True, True]
    framed = _row(flagged=[1, 2, 5], flagged_by_round=[[1], [2, 5], [], []], seed=2026)
    assert [g.met for g in colluder_goals([CLEAN, framed])] == [True, False, True, True]


def test_the_accuracy_goal_compares_runs_of_the_same_seed() -> None:
    clean = {2026: CLEAN, 2027: dataclasses.replace(CLEAN, seed=2027, final_accuracy=0.70)}
    attacked = [_row(final_accuracy=0.74), _row(seed=2028, final_accuracy=0.10)]
    assert accuracy_loss(attacked, clean) == pytest.approx(0.02)
    assert colluder_goals([CLEAN, _row(final_accuracy=0.75)])[3].met  # 1.00 point, not more
    assert not colluder_goals([CLEAN, _row(final_accuracy=0.7499)])[3].met


def test_each_bound_gets_its_own_goals() -> None:
    stated = _row(bound=5, bound_stated=True)
    texts = [g.text for g in colluder_goals([CLEAN, _row(), stated])]
    assert sum("bound 7 (default)" in t for t in texts) == 4
    assert sum("bound 5 (stated: q_max)" in t for t in texts) == 4


def test_rows_survive_robustness_json_beside_the_grid_rows() -> None:
    grid = [Row(**x) for x in results.read_json(results.RESULTS / "robustness.json")[:2]]
    document = join_rows(grid, [CLEAN, _row()])
    assert split_rows(document) == (grid, [CLEAN, _row()])


def test_merging_replaces_a_run_and_appends_new_ones() -> None:
    again = _row(final_accuracy=0.5)
    other = _row(seed=2027)
    assert merge_colluders([CLEAN, _row()], [again, other]) == [CLEAN, again, other]


def test_the_section_names_never_for_an_adversary_not_flagged() -> None:
    never = _row(flagged=[1], flagged_by_round=[[1], [], [], []], rounds_to_flag_all=None)
    text = colluders_section([CLEAN, never], ["notes"])
    assert "| never |" in text
    assert "**NOT met**: colluders, bound 7 (default): every colluder flagged" in text


def test_derive_reads_a_tied_round_whose_disputed_files_were_dropped() -> None:
    case = ColluderCase(BIBD, "only_majorities", "reversed_gradient", 3, None, 2026, 20)
    config = case.config(SETTINGS)
    assignment, chosen = round_assignment(config, 1), adversaries(config)
    plan = distortion_plan(assignment, chosen, strategy="only_majorities", seed=config.seed)
    disputed = sorted({f for fs in plan.values() for f in fs})
    pairs = sorted(
        {
            (min(a, h), max(a, h))
            for f in disputed
            for a in assignment.workers_of(f)
            if a in chosen
            for h in assignment.workers_of(f)
            if h not in chosen
        }
    )
    record = AgreementRecord(
        rule="unanimity",
        replied=tuple(range(15)),
        flagged=(),
        degrees={},
        conflicts=tuple(ConflictEdge(a, b, (), 1) for a, b in pairs),
        num_conflicts=len(pairs),
        outside_max_cliques=(),
        num_max_cliques=2,
        suspects=tuple(sorted({w for p in pairs for w in p})),
    )
    report = dataclasses.replace(round_report(1, dropped=tuple(disputed)), agreement=record)
    derived = derive(config, [report])
    assert derived.distorted_by_round == [0]
    assert derived.lying_by_round == [sorted(chosen)]
    assert derived.consistent
    nothing_dropped = dataclasses.replace(report, dropped_files=())
    assert not derive(config, [nothing_dropped]).consistent


def test_a_report_with_colluders_rows_gains_their_section(tmp_path: Path) -> None:
    shutil.copy(results.RESULTS / "robustness.json", tmp_path / "robustness.json")
    document = results.read_json(tmp_path / "robustness.json")
    results.write_json(tmp_path / "robustness.json", document + join_rows([], [CLEAN, _row()]))
    assert eval_robustness.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "robustness.md").read_text(encoding="utf-8")
    assert text.startswith("# Robustness under attack")
    assert "## Colluders under relabelling (issue 17)" in text
    assert "## Goals" in text  # the grid's report is still there


def test_the_goals_say_which_defence_ran_with_fewer_seeds() -> None:
    rows = [_row(seed=s) for s in (2026, 2027, 2028)] + [
        _row(defence="subsets (Aspis)", scheme="subsets", seed=2026)
    ]
    assert seed_counts(rows) == "3 seeds each; subsets 1"
    assert seed_counts(rows[:3]) == "3 seeds each"
