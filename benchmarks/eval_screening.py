"""The r = 1 outlier screening before and after issue 19, on the committed grids.

The screening score moved from the mean distance to the ``n - f - 2`` nearest other
updates (an ``n x n`` distance matrix, ``benchmarks.lib.pairwise_screening``) to the
distance from the coordinate-wise median (``phalanx.detection.outliers``). This
reruns every r = 1 row of the committed grids that screens:

- ``robustness``: the 25 rows ``r=1 median + screening`` of ``eval_robustness.py``
  (Fashion-MNIST MLP, K = 15, 20 rounds, q in {0, 1, 3, 5}, four attacks, weak and
  strong, z-score 3.5);
- ``compression``: the r = 1 rows ``fp32``, ``signsgd`` (the one row of the table that
  flagged honest workers) and the goal's candidate with error feedback (which made
  honest updates stand out more often) of ``eval_compression.py`` (CNN, K = 15, 30
  rounds, no attack, default z-score 8), seed 2026 only.

Each case runs twice, once with each score deciding (``driver``); in both runs every
r = 1 round is scored by both scores on the same updates (``ScreeningTap``), so the
two scores are compared on identical inputs, and each driver's own trajectory is
reported too. Writes ``benchmarks/results/screening.json`` and ``screening.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib import compression_grid, compression_runs, robustness_grid, robustness_runs
from benchmarks.lib.pairwise_screening import Score, ScreeningTap, counts
from benchmarks.lib.results import (
    RESULTS,
    hosts,
    machine,
    read_json,
    report_path,
    version,
    write_json,
    write_markdown,
)
from phalanx.plan import adversaries

DRIVERS: tuple[Score, ...] = ("old", "new")
COMPRESSION_METHODS = (
    compression_grid.FP32,
    compression_grid.Method("signsgd"),
    # The r = 1 goal's candidate: error feedback made honest updates stand out more often.
    compression_grid.adam_coded(20.0, low_rank=compression_grid.LOW_RANK),
)


def robustness_cases(quick: bool) -> list[robustness_grid.Case]:
    """The screened r = 1 rows of the robustness grid."""
    screened = [d for d in robustness_grid.DEFENCES if d.screening]
    if quick:
        return robustness_grid.grid(screened, ("ipm",), (0, 3), ("weak",), robustness_grid.SEED)
    return robustness_grid.grid(
        screened,
        robustness_grid.ATTACKS,
        robustness_grid.QS,
        robustness_grid.MODES,
        robustness_grid.SEED,
    )


def run_robustness(case: robustness_grid.Case, driver: Score, rounds: int) -> dict[str, Any]:
    """One robustness case with ``driver`` deciding; both scores' flags per round."""
    settings = robustness_grid.Settings(
        rounds=rounds, model="mlp", eval_samples=1000, optimizer="adam", server_lr=0.005
    )
    tap = ScreeningTap()
    with tap.driving(driver):
        row = robustness_runs.run_case(case, settings, robustness_grid.IN_PROCESS)
    truth = set(row.adversaries)
    return {
        "grid": "robustness",
        "case": f"{case.attack} {case.mode} q={case.q}",
        "attack": case.attack,
        "mode": case.mode,
        "q": case.q,
        "threshold": case.config(settings).detection.outlier_threshold,
        "driver": driver,
        "rounds": row.rounds,
        "final_accuracy": row.final_accuracy,
        "run_precision": row.precision,
        "run_recall": row.recall,
        "error": row.error,
        "seconds": row.seconds,
        "host": machine().cpu,
        **compared(tap, truth),
    }


def run_compression(method: compression_grid.Method, driver: Score, rounds: int) -> dict[str, Any]:
    """One r = 1 compression case (no attack) with ``driver`` deciding."""
    settings = compression_grid.Settings(
        rounds=rounds, flower_rounds=0, eval_samples=1000, samples_per_file={1: 32, 3: 14}
    )
    case = compression_grid.Case(method, 1)
    tap = ScreeningTap()
    with tap.driving(driver):
        row = compression_runs.run_case(case, settings)
    truth = set(adversaries(case.config(settings)))
    return {
        "grid": "compression",
        "case": method.label,
        "attack": "none",
        "mode": "none",
        "q": 0,
        "threshold": case.config(settings).detection.outlier_threshold,
        "driver": driver,
        "rounds": len(tap.rounds),
        "final_accuracy": row.final_accuracy,
        "run_precision": None,
        "run_recall": None,
        "error": row.error,
        "seconds": row.seconds,
        "host": machine().cpu,
        **compared(tap, truth),
    }


def compared(tap: ScreeningTap, truth: set[int]) -> dict[str, Any]:
    """Both scores' counts over the tapped rounds, and the rounds they agree on."""
    return {
        "old": counts(tap.rounds, "old", truth).to_dict(),
        "new": counts(tap.rounds, "new", truth).to_dict(),
        "same_flags_rounds": sum(r.flagged["old"] == r.flagged["new"] for r in tap.rounds),
        "scored_rounds": len(tap.rounds),
    }


def _cell(c: dict[str, Any]) -> str:
    return (
        f"{c['precision']:.2f} / {c['recall']:.2f} / {c['honest_flags']} / "
        f"{c['adversary_flags']} of {c['adversary_rounds']}"
    )


def markdown(rows: list[dict[str, Any]], minutes: float, quick: bool) -> str:
    """The report: one line per case and driver, both scores side by side."""
    host = machine()
    total = {s: sum(r[s]["honest_flags"] for r in rows) for s in DRIVERS}
    missed = {
        s: sum(r[s]["adversary_rounds"] - r[s]["adversary_flags"] for r in rows) for s in DRIVERS
    }
    same = sum(r["same_flags_rounds"] for r in rows)
    lost = sum(max(0, r["old"]["adversary_flags"] - r["new"]["adversary_flags"]) for r in rows)
    missed_attacks = sorted(
        {r["attack"] for r in rows if r["new"]["adversary_flags"] < r["new"]["adversary_rounds"]}
    )
    worse = [
        f"{r['grid']} {r['case']} ({r['driver']} deciding): old {r['old']['honest_flags']}, "
        f"new {r['new']['honest_flags']}"
        for r in rows
        if r["new"]["honest_flags"] > r["old"]["honest_flags"]
    ]
    scored = sum(r["scored_rounds"] for r in rows)
    lines = [
        "# r = 1 outlier screening: nearest-neighbour score (old) against distance to the "
        "coordinate-wise median (new)",
        "",
        f"{'Quick run' if quick else 'Full run'}: {minutes:.1f} minutes; rows on "
        f"{hosts(r.get('host') for r in rows)}, {host.cores} cores, torch {version('torch')}.",
        "",
        "**What is compared.** Every r = 1 row of the committed grids that screens: the "
        "robustness grid's `r=1 median + screening` (Fashion-MNIST MLP, K = 15, z-score 3.5, "
        "q in {0, 1, 3, 5}) and the compression grid's r = 1 `fp32` and `signsgd` (CNN, "
        "K = 15, no attack, the default z-score 8, seed 2026) with the r = 1 goal's candidate "
        "with error feedback (the other methods and seeds of that grid were not rerun). "
        "Each case runs twice, once with each "
        "score deciding who is left out (*driver*); in both runs each round's updates are "
        "scored by both, so the columns *old* and *new* judge the very same updates.",
        "",
        "**Cells** (*old*, *new*): precision / recall over distinct workers (as run "
        "summaries count them; 1.00 for an empty set) / honest worker-rounds flagged "
        "(false positives) / adversary worker-rounds flagged of those scored.",
        "",
        f"**In all** (both drivers): honest worker-rounds flagged: old {total['old']}, "
        f"new {total['new']}; adversary worker-rounds missed: old {missed['old']}, new "
        f"{missed['new']} (attacks: {', '.join(missed_attacks) or 'none'}); adversary "
        f"worker-rounds the old score flagged and the new did not: {lost}; rounds where "
        f"both flag the same workers: {same} of {scored}. Cases where the new score flagged "
        f"more honest worker-rounds than the old: {'; '.join(worse) or 'none'}.",
        "",
        "| grid | case | threshold | driver | old | new | same flags (rounds) | driver's "
        "final accuracy % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        accuracy = "-" if r["final_accuracy"] is None else f"{100 * r['final_accuracy']:.2f}"
        lines.append(
            f"| {r['grid']} | {r['case']} | {r['threshold']:g} | {r['driver']} | "
            f"{_cell(r['old'])} | {_cell(r['new'])} | {r['same_flags_rounds']} of "
            f"{r['scored_rounds']} | {accuracy} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two robustness cases, 3 rounds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-compression", action="store_true", help="skip the CNN rows")
    parser.add_argument(
        "--compression-only",
        default=None,
        help="run only these compression methods (labels, ';'-separated) and merge them in",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    rounds = 3 if args.quick else 20
    json_path = report_path(args.out, "screening", ".json", quick=args.quick)
    only = None if args.compression_only is None else set(args.compression_only.split(";"))
    minutes_before = 0.0
    if only is not None:
        kept = read_json(json_path)
        rows = [r for r in kept if not (r["grid"] == "compression" and r["case"] in only)]
        minutes_before = float(kept[0].get("minutes_total", 0.0)) if kept else 0.0
    for case in [] if only is not None else robustness_cases(args.quick):
        for driver in DRIVERS:
            rows.append(run_robustness(case, driver, rounds))
            print(rows[-1]["case"], driver, rows[-1]["old"], rows[-1]["new"], flush=True)
    if not args.no_compression:
        methods = (compression_grid.FP32,) if args.quick else COMPRESSION_METHODS
        for method in methods:
            if only is not None and method.label not in only:
                continue
            for driver in DRIVERS:
                rows.append(run_compression(method, driver, 3 if args.quick else 30))
                print(rows[-1]["case"], driver, rows[-1]["old"], rows[-1]["new"], flush=True)
    minutes = (time.perf_counter() - started) / 60 + minutes_before
    rows[0]["minutes_total"] = minutes
    write_json(json_path, rows)
    write_markdown(
        report_path(args.out, "screening", ".md", quick=args.quick),
        markdown(rows, minutes, args.quick),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
