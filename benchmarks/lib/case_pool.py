"""Running an evaluation's cases one after the other, or in a pool of processes."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

CaseT = TypeVar("CaseT")
RowT = TypeVar("RowT")


def run_cases(
    cases: Sequence[CaseT],
    run: Callable[[CaseT], RowT],
    *,
    jobs: int,
    cost: Callable[[CaseT], float],
    log: Callable[[RowT], None],
) -> list[RowT]:
    """Run every case, ``jobs`` processes at a time; the rows in the order of ``cases``.

    Parameters
    ----------
    cases : sequence
        What to run; each is sent to a worker process, so it must pickle.
    run : callable
        Runs one case and returns its row; a module-level function (or a
        ``functools.partial`` of one), since spawned processes import it.
    jobs : int
        Processes at a time; ``1`` or less runs every case in this process.
    cost : callable
        A case's rough work: the costliest start first, so that the pool's
        last minutes are not one long run.
    log : callable
        Called in this process with each row as it is done.
    """
    if jobs <= 1:
        rows = []
        for case in cases:
            rows.append(run(case))
            log(rows[-1])
        return rows
    done: dict[int, RowT] = {}
    order = sorted(range(len(cases)), key=lambda i: cost(cases[i]), reverse=True)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(run, cases[i]): i for i in order}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            log(done[futures[future]])
    return [done[i] for i in range(len(cases))]
