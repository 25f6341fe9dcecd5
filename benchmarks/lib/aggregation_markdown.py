"""``aggregation.md``: the machine, the goals, the table of every cell, and how it was measured."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from benchmarks.lib.aggregation_cases import AGGREGATORS, IMPLS, Skip
from benchmarks.lib.results import Machine

GOAL_N, GOAL_D = 50, 1_000_000


def machine_note(threads: str, host: Machine, versions: Mapping[str, str | None]) -> list[str]:
    """The machine section: CPU, threads, Python and the packages' versions, the system."""
    listed = ", ".join(f"{name} {v}" for name, v in versions.items() if v is not None)
    return [
        f"- CPU: {host.cpu}, {host.cores} logical cores",
        f"- threads: {threads} for every implementation (`torch.set_num_threads`, "
        "`OMP_NUM_THREADS`, `MKL_NUM_THREADS`, `OPENBLAS_NUM_THREADS`; Phalanx's sort pool "
        "follows `torch.get_num_threads()`). One thread by default because the two cores are "
        "shared with other work, where multi-threaded kernels spend their time waiting for "
        "descheduled threads; `--threads 2` measures both cores.",
        f"- Python {host.python}, {listed}",
        f"- {host.system}",
    ]


def fmt_ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:.3g}"


def fmt_ratio(peer: float | None, ours: float | None) -> str:
    return "—" if peer is None or ours is None or ours == 0 else f"{peer / ours:.2f}"


def fmt_mib(mib: float | None) -> str:
    return "—" if mib is None else f"{mib:.1f}"


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """Check the speed and memory goals; one line per goal."""
    at = {(r["aggregator"], r["impl"]): r for r in rows if r["n"] == GOAL_N and r["d"] == GOAL_D}
    lines = []
    if not at:
        return [f"- Not measured: the grid has no n={GOAL_N}, d={GOAL_D:,} cell."]
    for rule, factor, faster in (
        ("krum", 2.0, True),
        ("multi_krum", 2.0, True),
        ("bulyan", 2.0, True),
        ("median", 1.1, False),
        ("trimmed_mean", 1.1, False),
    ):
        ours = at.get((rule, "phalanx"))
        peers = [at[(rule, p)] for p in ("flower", "byzfl") if (rule, p) in at]
        if ours is None or not peers:
            continue
        best = min(peers, key=lambda r: r["median_s"])
        ratio = best["median_s"] / ours["median_s"]
        cpu_ratio = min(p["median_cpu_s"] for p in peers) / ours["median_cpu_s"]
        ok = ratio >= factor if faster else ratio >= 1.0 / factor
        want = (
            f"at least {factor:g}x faster than the fastest peer"
            if faster
            else f"at most {factor:g}x the fastest peer's time"
        )
        lines.append(
            f"- {rule} ({want}): phalanx {fmt_ms(ours['median_s'])} ms, fastest peer "
            f"{best['impl']} {fmt_ms(best['median_s'])} ms: peer / phalanx = {ratio:.2f} "
            f"(CPU time: {cpu_ratio:.2f}) — {'met' if ok else 'NOT met'}"
        )
    over = []
    for r in rows:
        if r["impl"] != "phalanx" or r["peak_mib"] is None:
            continue
        for p in ("flower", "byzfl"):
            peer = next(
                (
                    q
                    for q in rows
                    if q["impl"] == p
                    and (q["aggregator"], q["n"], q["d"]) == (r["aggregator"], r["n"], r["d"])
                ),
                None,
            )
            if (
                peer is not None
                and peer["peak_mib"] is not None
                and r["peak_mib"] > peer["peak_mib"] + 1.0
            ):
                over.append(
                    f"{r['aggregator']} n={r['n']} d={r['d']:,}: {r['peak_mib']:.1f} MiB "
                    f"vs {p} {peer['peak_mib']:.1f} MiB"
                )
    lines.append(
        "- peak memory no more than the peers' (1 MiB measurement slack), every cell: "
        + ("met" if not over else "NOT met: " + "; ".join(over))
    )
    return lines


def markdown(
    rows: list[dict[str, Any]],
    skips: list[Skip],
    args: argparse.Namespace,
    load: tuple[str, str],
    wall: float,
    extra_note: str,
    *,
    host: Machine,
    versions: Mapping[str, str | None],
) -> str:
    """aggregation.md; ``host`` and ``versions`` describe the machine and the packages measured."""
    lines = [
        "# Robust aggregation: Phalanx beside Flower and ByzFL",
        "",
        f"{'Quick' if args.quick else 'Full'} grid, written by `benchmarks/bench_aggregation.py"
        f"{' --quick' if args.quick else ''}` in {wall / 60:.1f} min. Median of {args.repeats} "
        "timed calls after one warm-up, the implementations of a rule interleaved in one "
        "process on the same inputs. f = (n - 3) // 4 (the largest f that Bulyan accepts); "
        "the last f rows are the honest-looking Gaussian rows reversed and scaled by 100. "
        "Ratios are peer / phalanx: above 1 means Phalanx is faster or smaller.",
        "",
        "## Machine",
        "",
        *machine_note(args.threads, host, versions),
        f"- load average (1 min) before / after: {load[0]} / {load[1]} — the machine is shared "
        "with other work, so absolute times carry noise; ratios come from interleaved calls.",
        "",
        "## Goals (n = 50, d = 1,000,000)",
        "",
        *goals(rows),
        "",
    ]
    by_cell: dict[tuple[int, int], dict[tuple[str, str], dict[str, Any]]] = {}
    for row in rows:
        if row["aggregator"] == "detection":
            continue
        by_cell.setdefault((row["n"], row["d"]), {})[(row["aggregator"], row["impl"])] = row
    lines += [
        "## Results",
        "",
        "Times in ms (wall clock, `perf_counter`); the ratios give wall clock and, in "
        "brackets, CPU time of the process (`process_time`), which other processes on the "
        "machine disturb less. Memory is the peak resident memory above the inputs, in MiB. "
        "The last column is each output's largest coordinate error against the same "
        "definition evaluated in float64 (Phalanx's function on the float64 stack), where "
        "the peer's definition is the same.",
        "",
        "| rule | n | d | f | phalanx ms | flower ms | byzfl ms | flower / phalanx | "
        "byzfl / phalanx | phalanx MiB | flower MiB | byzfl MiB | max abs error vs float64 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (n, d), cell in sorted(by_cell.items()):
        for rule in AGGREGATORS:
            got = {impl: cell.get((rule, impl)) for impl in IMPLS}
            ours = got["phalanx"]
            if ours is None:
                continue

            def value(impl: str, key: str, got: dict[str, Any] = got) -> Any:
                row = got[impl]
                return None if row is None else row.get(key)

            diffs = [
                f"{impl} {value(impl, 'max_abs_diff_vs_float64'):.1e}"
                for impl in IMPLS
                if value(impl, "max_abs_diff_vs_float64") is not None
            ]

            def ratio(impl: str, ours: dict[str, Any] = ours) -> str:
                wall = fmt_ratio(value(impl, "median_s"), ours["median_s"])
                cpu = fmt_ratio(value(impl, "median_cpu_s"), ours["median_cpu_s"])
                return wall if wall == "—" else f"{wall} ({cpu})"

            lines.append(
                f"| {rule} | {n} | {d:,} | {ours['f']} | {fmt_ms(ours['median_s'])} | "
                f"{fmt_ms(value('flower', 'median_s'))} | {fmt_ms(value('byzfl', 'median_s'))} | "
                f"{ratio('flower')} | {ratio('byzfl')} | "
                f"{fmt_mib(ours['peak_mib'])} | {fmt_mib(value('flower', 'peak_mib'))} | "
                f"{fmt_mib(value('byzfl', 'peak_mib'))} | {', '.join(diffs) or '—'} |"
            )
    if skips:
        lines += ["", "Left out:", ""]
        lines += [f"- {s.impl} {s.aggregator} at n={s.n}, d={s.d:,}: {s.reason}." for s in skips]
    detection = [r for r in rows if r["aggregator"] == "detection"]
    lines += ["", "## Detection", ""]
    if detection:
        lines += ["| variant | median ms | flagged |", "|---|---|---|"]
        lines += [
            f"| {r['variant']} | {fmt_ms(r['median_s'])} | {r['flagged']} |" for r in detection
        ]
        lines += [""]
    lines += [extra_note, ""]
    lines += [
        "## How",
        "",
        "- **Phalanx** (`phalanx.aggregation`): Krum, Multi-Krum, Bulyan's selection, NNM and "
        "the geometric median read one Gram matrix (float32 `syrk` over column blocks of "
        "65,536, summed in float64), so no (n, n, d) tensor is formed; the geometric median "
        "runs its Weiszfeld iterations on the pairwise distances and reads the stack once more "
        "for the result. Centered clipping computes exact distances to its centre block by "
        "block in a reused buffer. Median, trimmed mean, median-of-means and Bulyan's "
        "coordinate phase sort cache-sized transposed blocks with NumPy's SIMD sort. Bulyan is "
        "the original: Krum picks n - 2f rows one at a time from the distances computed once.",
        "- **Flower** 1.42: `Strategy.aggregate_train(1, replies)` on reply `Message`s built "
        "outside the timed region (fresh for every call). The time includes Flower turning "
        "each `ArrayRecord` back into NumPy arrays, which its strategies do on every call. "
        "Flower's Bulyan selects its n - 2f rows by one-shot Multi-Krum scores, not by Krum "
        "one at a time, so its output differs from the original's; FedTrimmedAvg is given "
        "beta = (f + 1/4) / n so that it trims f values from each end.",
        "- **ByzFL** 0.0.11: the classes of `byzfl/aggregators/aggregators.py` and "
        "`preaggregators.py`, loaded with `importlib.util.spec_from_file_location` (with "
        "`byzfl/utils/misc.py` and `torch_tools.py`, which they import) under empty stand-in "
        "`byzfl` packages, because `byzfl/__init__.py` imports torchvision, which cannot be "
        "imported beside the CPU torch here. Called on the same torch tensor. ByzFL's Krum "
        "scores n - f - 1 neighbours (Blanchard et al., Flower and Phalanx: n - f - 2); its "
        "geometric median starts at zero (Phalanx: at the mean), both with nu = 0.1 and 3 "
        "Weiszfeld steps; centered clipping with tau = 100 and one iteration from zero in "
        "both (ByzFL's object keeps its last output as the next start, so it is reset, "
        "untimed, before every call). ByzFL has no Bulyan and no median-of-means.",
        "- **Peak memory**: "
        + (
            "one fresh process per (implementation, rule, n, d). "
            if not args.quick
            else "one process per (implementation, n, d), measuring the rules in turn with "
            "`MALLOC_MMAP_THRESHOLD_=131072` so that freed buffers leave the process. "
        )
        + "The process builds the inputs (for Flower, the reply Messages), warms the rule up "
        "on a (n, 512) stack, resets the kernel's resident high-water mark "
        "(`/proc/self/clear_refs`), makes one call, and reports `VmHWM` minus `VmRSS` just "
        "before the call. This counts every page touched by torch, NumPy or BLAS during the "
        "call, including the output; `tracemalloc` would miss torch's allocations.",
        "- **Error vs float64**: the reference is Phalanx's function on `x.double()`; it is "
        "left out where a peer's definition differs (ByzFL's Krum and geometric median, "
        "Flower's Bulyan, random bucketing). An error of the size of an update coordinate "
        "(around 0.5 here) means a different selection: ByzFL's NNM squares float32 "
        "`torch.cdist` distances (relative error about 2e-5 at d = 100,000, against about 3e-7 "
        "for Phalanx's float64-accumulated Gram matrix) and can pick a different n - f-th "
        "neighbour when two candidates are almost equally far.",
        "- **Memory of Krum**: ByzFL's Krum returns a view of the chosen input row, so its peak "
        "leaves out the output; Phalanx's does too since 2026-11-29 (it returned a copy of d "
        "floats before, which the rows measured before then include).",
        "",
    ]
    return "\n".join(lines)
