"""Timing in ``bench_aggregation.py``: the rules' cases, interleaved; ``detect`` on one round."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from benchmarks.lib.aggregation_cases import SEED, Case


def time_cases(cases: Sequence[Case], repeats: int) -> dict[tuple[str, str], dict[str, Any]]:
    """Median time of every case, implementations of one rule interleaved."""
    by_rule: dict[str, list[Case]] = {}
    for case in cases:
        by_rule.setdefault(case.aggregator, []).append(case)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for rule, group in by_rule.items():
        outputs: dict[str, np.ndarray[Any, Any]] = {}
        for case in group:  # warm-up, and the output for the agreement check
            outputs[case.impl] = case.as_numpy(case.run(case.prepare()))
        times: dict[str, list[float]] = {case.impl: [] for case in group}
        cpu: dict[str, list[float]] = {case.impl: [] for case in group}
        for r in range(repeats):
            for case in group[r % len(group) :] + group[: r % len(group)]:
                state = case.prepare()
                gc.collect()
                start, start_cpu = time.perf_counter(), time.process_time()
                out = case.run(state)
                cpu[case.impl].append(time.process_time() - start_cpu)
                times[case.impl].append(time.perf_counter() - start)
                del out, state
        exact = next((c.reference() for c in group if c.reference is not None), None)
        for case in group:
            diff = None
            out = outputs[case.impl]
            if exact is not None and case.comparable and out.shape == exact.shape:
                diff = float(np.max(np.abs(out - exact)))
            results[(rule, case.impl)] = {
                "median_s": float(np.median(times[case.impl])),
                "median_cpu_s": float(np.median(cpu[case.impl])),
                "max_abs_diff_vs_float64": diff,
            }
        print(
            f"  {rule:18s} "
            + "  ".join(
                f"{c.impl} {results[(rule, c.impl)]['median_s'] * 1e3:9.2f} ms" for c in group
            ),
            flush=True,
        )
    return results


def extra_rows(repeats: int, d: int) -> tuple[list[dict[str, Any]], str]:
    """Rows beyond the aggregators: detection timing, when the detection module exists.

    Times ``phalanx.detection.detect`` on one round of the ``random`` scheme with
    ``K = 100`` workers, ``r = 3`` and ``K`` files of ``d`` float32 values (1e5 in
    the full run), five adversaries distorting every file they hold, in ``exact``
    and ``tolerance`` mode. Returns the rows and a note for the markdown.
    """
    try:
        from phalanx.assignment import make_assignment
        from phalanx.detection import Replica, detect, payload_digest
    except ImportError as missing:
        return [], f"Detection not timed: {missing}."
    workers, r, adversaries = 100, 3, (3, 17, 42, 58, 91)
    assignment = make_assignment("random", workers, r, seed=SEED)
    generator = torch.Generator().manual_seed(SEED)
    replicas = []
    for file, holders in enumerate(assignment.files):
        honest = torch.randn(d, generator=generator)
        for worker in holders:
            value = -100.0 * honest if worker in adversaries else honest.clone()
            replicas.append(Replica(worker, file, value, payload_digest(value.numpy().tobytes())))
    rows: list[dict[str, Any]] = []
    for mode in ("exact", "tolerance"):
        detect(assignment, replicas, mode=mode)  # warm-up
        times, cpu = [], []
        for _ in range(repeats):
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            verdict = detect(assignment, replicas, mode=mode)
            cpu.append(time.process_time() - start_cpu)
            times.append(time.perf_counter() - start)
        flagged = sorted(verdict.flagged) if hasattr(verdict, "flagged") else None
        rows.append(
            {
                "aggregator": "detection",
                "impl": "phalanx",
                "n": workers,
                "d": d,
                "median_s": float(np.median(times)),
                "peak_mib": None,
                "median_cpu_s": float(np.median(cpu)),
                "variant": f"{mode}, random, K={workers}, r={r}, files={assignment.num_files}",
                "flagged": flagged,
            }
        )
        print(f"  detection {mode:9s} {rows[-1]['median_s'] * 1e3:9.2f} ms flagged={flagged}")
    note = (
        f"Detection: `phalanx.detection.detect` on one round of the `random` scheme, K={workers}, "
        f"r={r}, {assignment.num_files} files of d={d:,} float32 values, adversaries "
        f"{list(adversaries)} sending -100 x the honest value for every file they hold. Replica "
        "digests are computed outside the timed region (workers send them). Peak memory is not "
        "measured for detection."
    )
    return rows, note
