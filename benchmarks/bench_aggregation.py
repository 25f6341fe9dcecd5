"""Speed and peak memory of ``phalanx.aggregation`` beside Flower 1.42 and ByzFL 0.0.11.

Every rule that a peer also implements is timed on the same inputs, in the same
process, interleaved (the order of the implementations rotates every repeat, so
that load from other processes on a shared machine falls on all of them alike):

- ``phalanx``: ``phalanx.aggregation`` on a ``(n, d)`` float32 tensor.
- ``flower``: the ``aggregate_train`` method of Flower's own strategy (``FedAvg``,
  ``FedMedian``, ``FedTrimmedAvg``, ``Krum``, ``MultiKrum``, ``Bulyan``) on reply
  ``Message`` objects that carry one ``ArrayRecord`` and one ``MetricRecord``
  each, as a ClientApp sends them. The replies are built outside the timed
  region, afresh for every call (``FedMedian``, ``FedTrimmedAvg`` and ``Bulyan``
  empty the replies they aggregate). The timed region therefore includes
  Flower's deserialisation of the arrays, which is part of its aggregation.
- ``byzfl``: ByzFL's aggregator classes on the same tensor. ByzFL's package
  ``__init__`` imports torchvision, which cannot be imported beside the CPU
  torch here, so ``byzfl/aggregators/aggregators.py`` and ``preaggregators.py``
  (and the ``byzfl/utils`` modules they import) are loaded with
  ``importlib.util.spec_from_file_location`` under empty stand-ins for the
  ``byzfl`` packages; no code of the package ``__init__`` runs.

Time: median of ``--repeats`` calls after one warm-up call, ``time.perf_counter``.

Peak memory: a fresh Python process per (implementation, rule, n, d) builds the
same inputs, warms the rule up on a narrow stack, resets the kernel's resident
high-water mark (``echo 5 > /proc/self/clear_refs``), makes one call, and
reports ``VmHWM`` minus the resident size just before the call (both from
``/proc/self/status``). This sees every allocation (torch, NumPy, BLAS) that was
touched, which ``tracemalloc`` does not. With ``--quick`` one process measures
all rules of an implementation in turn, resetting the mark before each, with
``MALLOC_MMAP_THRESHOLD_`` fixed so that large buffers go back to the system
when freed.

Writes ``benchmarks/results/aggregation.json`` and ``aggregation.md``
(``aggregation_quick.*`` with ``--quick``, so that a quick run never overwrites
the full results).
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv: list[str]) -> str:
    """``--threads`` must act before NumPy and torch start their thread pools."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


THREADS = _threads_from_argv(sys.argv)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.aggregation_cases import (  # noqa: E402
    AGGREGATORS,
    IMPLS,
    Skip,
    build_cases,
    byzantine_count,
    make_updates,
)
from benchmarks.lib.aggregation_markdown import goals, markdown  # noqa: E402
from benchmarks.lib.aggregation_memory import measure_memory, memory_child  # noqa: E402
from benchmarks.lib.aggregation_peers import flower_setup, load_byzfl  # noqa: E402
from benchmarks.lib.aggregation_timing import extra_rows, time_cases  # noqa: E402
from benchmarks.lib.results import (  # noqa: E402
    RESULTS,
    load_average,
    machine,
    report_path,
    version,
    write_json,
    write_markdown,
)

torch.set_num_threads(int(THREADS))

FULL_NS = (15, 50, 100)
FULL_DS = (100_000, 1_000_000)
QUICK_NS = (50,)
QUICK_DS = (20_000,)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced grid, under a minute")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per case")
    parser.add_argument("--ns", type=int, nargs="*", default=None, help="override the n grid")
    parser.add_argument("--ds", type=int, nargs="*", default=None, help="override the d grid")
    parser.add_argument("--impls", nargs="*", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--aggregators", nargs="*", default=list(AGGREGATORS), choices=AGGREGATORS)
    parser.add_argument("--no-memory", action="store_true", help="skip the memory processes")
    parser.add_argument("--no-detection", action="store_true", help="skip the detection rows")
    parser.add_argument("--byzfl-nnm-limit-gib", type=float, default=2.0)
    parser.add_argument(
        "--threads",
        default=THREADS,
        help="threads for torch, BLAS and Phalanx's sort (default 1: the machine is shared)",
    )
    parser.add_argument("--out", type=Path, default=None, help="output stem (.json and .md)")
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.memory_child is not None:
        print(json.dumps(memory_child(json.loads(args.memory_child))))
        return

    ns = args.ns or (QUICK_NS if args.quick else FULL_NS)
    ds = args.ds or (QUICK_DS if args.quick else FULL_DS)
    args.repeats = args.repeats or (3 if args.quick else 5)
    out = args.out or report_path(RESULTS, "aggregation", "", quick=args.quick)
    nnm_limit = args.byzfl_nnm_limit_gib * 2**30
    byzfl = load_byzfl() if "byzfl" in args.impls else None
    fl = flower_setup() if "flower" in args.impls else None
    # Flower's ArrayRecord.to_numpy_ndarrays(keep_input=False), used by its Bulyan, calls
    # gc.collect() once per reply; freezing the objects made by imports keeps that cost to
    # what a lean ServerApp process would pay, rather than what this harness would add.
    gc.collect()
    gc.freeze()

    started, load_before = time.perf_counter(), f"{load_average():.2f}"
    rows: list[dict[str, Any]] = []
    skips: list[Skip] = []
    for d in ds:
        for n in ns:
            f = byzantine_count(n)
            print(f"n={n} d={d:,} f={f}", flush=True)
            x = make_updates(n, d)
            cases = build_cases(x, args.impls, args.aggregators, byzfl, fl, nnm_limit, skips)
            timed = time_cases(cases, args.repeats)
            del x, cases
            gc.collect()
            peaks: dict[str, dict[str, float]] = {}
            if not args.no_memory:
                for impl in args.impls:
                    rules = [a for (a, i) in timed if i == impl]
                    peaks[impl] = measure_memory(
                        n,
                        d,
                        impl,
                        rules,
                        nnm_limit,
                        one_process_per_rule=not args.quick,
                        script=Path(__file__),
                    )
                    print(
                        f"  peak MiB {impl}: "
                        + ", ".join(f"{a} {v:.1f}" for a, v in peaks[impl].items()),
                        flush=True,
                    )
            for (aggregator, impl), result in timed.items():
                rows.append(
                    {
                        "aggregator": aggregator,
                        "impl": impl,
                        "n": n,
                        "d": d,
                        "median_s": result["median_s"],
                        "peak_mib": peaks.get(impl, {}).get(aggregator),
                        "median_cpu_s": result["median_cpu_s"],
                        "threads": int(THREADS),
                        "f": f,
                        "repeats": args.repeats,
                        "max_abs_diff_vs_float64": result["max_abs_diff_vs_float64"],
                    }
                )
    extra: list[dict[str, Any]] = []
    extra_note = "Detection not timed (--no-detection)."
    if not args.no_detection:
        extra, extra_note = extra_rows(args.repeats, 10_000 if args.quick else 100_000)
    rows += extra
    wall = time.perf_counter() - started
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out.with_suffix(".json"), rows, indent=1)
    text = markdown(
        rows,
        skips,
        args,
        (load_before, f"{load_average():.2f}"),
        wall,
        extra_note,
        host=machine(),
        versions={name: version(name) for name in ("torch", "numpy", "flwr", "byzfl")},
    )
    write_markdown(out.with_suffix(".md"), text, echo=False)
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')} in {wall:.0f} s")
    for line in goals(rows):
        print(line)


if __name__ == "__main__":
    main()
