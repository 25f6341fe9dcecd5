"""Time of the r = 1 outlier score at K = 100, 1,000 and 5,000 updates: old against new.

*old* is the nearest-neighbour score Phalanx used before issue 19 (an ``n x n``
float64 distance matrix, kept in ``benchmarks.lib.pairwise_screening``); *new* is
``phalanx.detection.outlier_scores`` (distance to the coordinate-wise median,
``O(n d)``). The updates are synthetic: ``n`` honest rows of Gaussian noise around
a common gradient plus 5 % of them reversed and scaled by 100, ``d`` coordinates
(10,000 by default; the old score's cost grows as ``n^2 d``, the new one's as
``n d``). One process, one thread (``torch.set_num_threads(1)``, as the
coordinator's workers run), CPU time of this process, so other processes on the
machine weigh little. Each K runs ``--pairs`` alternating pairs (old then new, new
then old), so both see the machine's quiet and busy moments alike; the report
gives the median time of each and the ratio old / new of every pair (median, min,
max); 6 pairs at K = 100 and 1,000, 3 at 5,000. Both scores flag the same rows on this
data (checked in every pair).

Writes ``benchmarks/results/screening_time.json`` and ``screening_time.md``
(``*_quick.*`` with ``--quick``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from torch import Tensor  # noqa: E402

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.pairwise_screening import SCORES, Score  # noqa: E402
from benchmarks.lib.results import (  # noqa: E402
    RESULTS,
    machine,
    report_path,
    version,
    write_json,
    write_markdown,
)
from phalanx.detection import DEFAULT_OUTLIER_THRESHOLD  # noqa: E402

KS = (100, 1_000, 5_000)


def updates(n: int, d: int, seed: int) -> tuple[Tensor, set[int]]:
    """``n`` synthetic updates of ``d`` coordinates; 5 % reversed and scaled by 100."""
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(d, generator=g)
    values = mean + 0.5 * torch.randn(n, d, generator=g)
    liars = set(range(0, n, 20))
    for i in liars:
        values[i] = -100.0 * values[i]
    return values, liars


def timed(score: Score, values: Tensor) -> tuple[float, set[int]]:
    """CPU seconds of one score over ``values``, and the rows it flags."""
    started = time.process_time()
    scores = SCORES[score](values, 0)
    seconds = time.process_time() - started
    return seconds, {i for i, s in enumerate(scores.tolist()) if s > DEFAULT_OUTLIER_THRESHOLD}


def measure(n: int, d: int, pairs: int) -> dict[str, Any]:
    """Alternating pairs at one K."""
    values, liars = updates(n, d, seed=n)
    seconds: dict[Score, list[float]] = {"old": [], "new": []}
    ratios = []
    same = True
    for i in range(pairs):
        order: tuple[Score, Score] = ("old", "new") if i % 2 == 0 else ("new", "old")
        flags = {}
        for score in order:
            t, flags[score] = timed(score, values)
            seconds[score].append(t)
        same = same and flags["old"] == flags["new"] == liars
        ratios.append(seconds["old"][-1] / seconds["new"][-1])
    return {
        "K": n,
        "d": d,
        "pairs": pairs,
        "old_s": seconds["old"],
        "new_s": seconds["new"],
        "old_median_s": statistics.median(seconds["old"]),
        "new_median_s": statistics.median(seconds["new"]),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "same_flags": same,
    }


def markdown(rows: list[dict[str, Any]], quick: bool) -> str:
    """The report."""
    host = machine()
    lines = [
        "# r = 1 outlier score: time, old (all pairs) against new (distance to the median)",
        "",
        f"{'Quick run' if quick else 'Full run'} on {host.cpu} ({host.cores} cores), "
        f"torch {version('torch')}, one thread, CPU time of the process. Synthetic updates "
        f"({rows[0]['d']:,} coordinates, 5 % reversed and scaled by 100); each K runs "
        "alternating pairs; *ratio* is old / new per pair (median, min and max over the "
        "pairs). *same flags*: both scores flagged exactly the reversed rows in every pair.",
        "",
        "| K | pairs | old, median s | new, median s | ratio old / new (median) | min | max "
        "| same flags |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['K']:,} | {r['pairs']} | {r['old_median_s']:.3f} | {r['new_median_s']:.4f} "
            f"| {r['ratio_median']:.1f} | {r['ratio_min']:.1f} | {r['ratio_max']:.1f} | "
            f"{'yes' if r['same_flags'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K = 100 and 1,000, 2 pairs")
    parser.add_argument("--dim", type=int, default=10_000, help="coordinates per update")
    parser.add_argument("--pairs", type=int, default=None, help="alternating pairs per K")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    ks = KS[:2] if args.quick else KS
    rows = []
    for n in ks:
        # The old score takes about a minute a call at K = 5,000: fewer pairs there.
        pairs = args.pairs or (2 if args.quick else 6 if n <= 1_000 else 3)
        rows.append(measure(n, args.dim, pairs))
        print(rows[-1], flush=True)
    write_json(report_path(args.out, "screening_time", ".json", quick=args.quick), rows)
    write_markdown(
        report_path(args.out, "screening_time", ".md", quick=args.quick),
        markdown(rows, args.quick),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
