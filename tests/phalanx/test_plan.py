"""The round's plan as tasks carry it equals the plan every worker used to rebuild."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from phalanx.config import RunConfig
from phalanx.data import split_files
from phalanx.plan import (
    assigned_tasks,
    file_bounds,
    file_samples,
    round_assignment,
    round_samples,
    task_samples,
)
from tests.support.configs import small_config

SCHEMES = st.one_of(
    st.tuples(st.just("random"), st.integers(2, 60), st.integers(1, 5)),
    st.tuples(st.just("none"), st.integers(1, 60), st.just(1)),
    st.builds(lambda g, r: ("groups", g * r, r), st.integers(1, 12), st.integers(1, 5)),
    st.tuples(st.just("subsets"), st.integers(3, 8), st.integers(2, 3)),
    st.tuples(st.just("bibd"), st.sampled_from([7, 9, 13, 15]), st.just(3)),
    st.sampled_from([("mols", 15, 3), ("mols", 21, 3), ("mols", 10, 2), ("mols", 35, 5)]),
)


def configured(scheme: str, k: int, r: int, seed: int, relabel: bool, per_file: int) -> RunConfig:
    try:
        return small_config(
            seed=seed,
            data={"samples_per_file": per_file},
            assignment={"scheme": scheme, "num_workers": k, "r": r, "relabel": relabel},
            attack={"name": None, "q": 0},
        )
    except (ValidationError, ValueError):
        assume(False)
        raise


def old_samples_of(config: RunConfig, num_train: int, round: int, worker: int) -> list[list[int]]:
    """What a worker used to derive: the whole round's assignment and every file's samples."""
    assignment = round_assignment(config, round)
    samples = file_samples(config, num_train, round, assignment.num_files)
    return [samples[f].tolist() for f in assignment.files_of(worker)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    scheme=SCHEMES,
    seed=st.integers(0, 2**31 - 1),
    round=st.integers(1, 50),
    relabel=st.booleans(),
    per_file=st.integers(1, 9),
    spare=st.integers(0, 500),
)
def test_every_task_carries_the_samples_the_whole_plan_gives_its_worker(
    scheme: tuple[str, int, int],
    seed: int,
    round: int,
    relabel: bool,
    per_file: int,
    spare: int,
) -> None:
    config = configured(*scheme, seed, relabel, per_file)
    assignment = round_assignment(config, round)
    num_train = per_file * assignment.num_files + spare
    samples = round_samples(config, num_train, round, assignment.num_files)
    workers = range(assignment.num_workers)

    tasks = assigned_tasks("run", round, "n", assignment, samples, workers)

    for w in workers:
        task = tasks[w]
        assert task.files == assignment.files_of(w)
        assert [list(s) for s in task.samples or ()] == old_samples_of(config, num_train, round, w)


@given(st.integers(1, 3000), st.integers(1, 3000))
def test_file_bounds_cut_a_batch_as_split_files_does(size: int, files: int) -> None:
    assume(files <= size)
    batch = torch.arange(size)

    cut = [batch[start:stop].tolist() for start, stop in file_bounds(size, files)]

    assert cut == [chunk.tolist() for chunk in split_files(batch, files)]


def test_file_bounds_refuse_more_files_than_samples() -> None:
    with pytest.raises(ValueError, match=r"num_files must be in 1\.\.3"):
        file_bounds(3, 4)


def test_a_task_s_samples_are_its_own_files_in_its_order() -> None:
    samples = [(0, 1), (2, 3), (4, 5)]

    assert task_samples(samples, (2, 0)) == ((4, 5), (0, 1))
