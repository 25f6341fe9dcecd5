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
import importlib.util  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, get_args  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from phalanx import aggregation as agg  # noqa: E402
from phalanx.config import PreRule, Rule  # noqa: E402

torch.set_num_threads(int(THREADS))

RESULTS = Path(__file__).parent / "results"
FULL_NS = (15, 50, 100)
FULL_DS = (100_000, 1_000_000)
QUICK_NS = (50,)
QUICK_DS = (20_000,)
SEED = 2024
BUCKET_SIZE = 2
IMPLS = ("phalanx", "flower", "byzfl")
AGGREGATORS = (*get_args(Rule), *get_args(PreRule))
GOAL_N, GOAL_D = 50, 1_000_000


def byzantine_count(n: int) -> int:
    """The largest ``f`` that every rule accepts (Bulyan needs ``n >= 4 f + 3``)."""
    return (n - 3) // 4


def make_updates(n: int, d: int, seed: int = SEED) -> torch.Tensor:
    """Gaussian honest updates; the last ``f`` rows are reversed and scaled by 100."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + n * 10_007 + d)
    x = torch.randn(n, d, generator=generator)
    f = byzantine_count(n)
    x[n - f :] *= -100.0
    return x


# --------------------------------------------------------------------------- peers


def load_byzfl() -> dict[str, Any]:
    """ByzFL's aggregator and pre-aggregator classes, without running ``byzfl/__init__``."""
    spec = importlib.util.find_spec("byzfl")  # locating a top-level package runs nothing
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("byzfl is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, folder in (
        ("byzfl", root),
        ("byzfl.utils", root / "utils"),
        ("byzfl.aggregators", root / "aggregators"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package

    def load(name: str, path: Path) -> types.ModuleType:
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)
        return module

    load("byzfl.utils.torch_tools", root / "utils" / "torch_tools.py")
    load("byzfl.utils.misc", root / "utils" / "misc.py")
    aggregators = load("byzfl.aggregators.aggregators", root / "aggregators" / "aggregators.py")
    pre = load("byzfl.aggregators.preaggregators", root / "aggregators" / "preaggregators.py")
    return {**vars(aggregators), **vars(pre)}


def flower_setup() -> dict[str, Any]:
    """Flower's strategies and what a reply needs, as a ServerApp process has them."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.serverapp import strategy
    from flwr.supercore.task_identity import TaskIdentity

    # A ServerApp's runtime sets these before any Message is built.
    TaskIdentity.run_id = 1
    TaskIdentity.node_id = 0
    TaskIdentity.task_id = 1
    logging.getLogger("flwr").setLevel(logging.WARNING)  # one INFO line per call otherwise
    return {
        "strategy": strategy,
        "ArrayRecord": ArrayRecord,
        "Message": Message,
        "MetricRecord": MetricRecord,
        "RecordDict": RecordDict,
    }


def flower_replies(fl: dict[str, Any], x: torch.Tensor) -> list[Any]:
    """One reply Message per row: an ArrayRecord and ``num-examples = 1``."""
    replies = []
    for i, row in enumerate(x.numpy()):
        instruction = fl["Message"](fl["RecordDict"](), dst_node_id=i + 1, message_type="train")
        content = fl["RecordDict"](
            {
                "arrays": fl["ArrayRecord"]([row]),
                "metrics": fl["MetricRecord"]({"num-examples": 1}),
            }
        )
        replies.append(fl["Message"](content, reply_to=instruction))
    return replies


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    """One implementation of one rule: ``prepare`` runs untimed, ``run`` is timed."""

    aggregator: str
    impl: str
    prepare: Callable[[], Any]
    run: Callable[[Any], Any]
    as_numpy: Callable[[Any], np.ndarray[Any, Any]]
    comparable: bool = True  # same definition as phalanx's, so outputs should agree
    reference: Callable[[], np.ndarray[Any, Any]] | None = None  # the rule in float64


@dataclass
class Skip:
    """A peer rule left out, and why."""

    aggregator: str
    impl: str
    n: int
    d: int
    reason: str


def tensor_numpy(out: Any) -> np.ndarray[Any, Any]:
    return np.asarray(out.detach().numpy(), dtype=np.float64)


def build_cases(
    x: torch.Tensor,
    impls: Sequence[str],
    aggregators: Sequence[str],
    byzfl: dict[str, Any] | None,
    fl: dict[str, Any] | None,
    nnm_limit_bytes: float,
    skips: list[Skip] | None = None,
) -> list[Case]:
    n, d = x.shape
    f = byzantine_count(n)
    cases: list[Case] = []

    def add(aggregator: str, impl: str, *args: Any, **kwargs: Any) -> None:
        if impl in impls and aggregator in aggregators:
            cases.append(Case(aggregator, impl, *args, **kwargs))

    def same(value: Any = None) -> Callable[[], Any]:
        return lambda: x if value is None else value

    # phalanx
    phalanx_calls: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "mean": lambda u: agg.mean(u, f=f),
        "median": lambda u: agg.coordinate_median(u, f=f),
        "trimmed_mean": lambda u: agg.trimmed_mean(u, f=f),
        "geometric_median": lambda u: agg.geometric_median(u, f=f, nu=0.1, max_iter=3, eps=0.0),
        "krum": lambda u: agg.krum(u, f=f),
        "multi_krum": lambda u: agg.multi_krum(u, f=f),
        "bulyan": lambda u: agg.bulyan(u, f=f),
        "centered_clipping": lambda u: agg.centered_clipping(u, f=f, tau=100.0, n_iter=1),
        "median_of_means": lambda u: agg.median_of_means(u, f=f),
        "nnm": lambda u: agg.nearest_neighbor_mixing(u, f=f),
        "bucketing": lambda u: agg.bucketing(u, f=f, s=BUCKET_SIZE, seed=SEED),
    }
    for name, call in phalanx_calls.items():
        # The same definition evaluated in float64, to measure every output's rounding error.
        def reference(call: Callable[[torch.Tensor], torch.Tensor] = call) -> Any:
            return tensor_numpy(call(x.double()))

        add(name, "phalanx", same(), call, tensor_numpy, reference=reference)

    # Flower: the strategy's aggregate_train on fresh reply Messages
    if fl is not None:
        s = fl["strategy"]
        strategies: dict[str, Any] = {
            "mean": s.FedAvg(),
            "median": s.FedMedian(),
            # Flower trims int(beta * n) values from each end: beta = (f + 1/4) / n gives f.
            "trimmed_mean": s.FedTrimmedAvg(beta=(f + 0.25) / n),
            "krum": s.Krum(num_malicious_nodes=f),
            "multi_krum": s.MultiKrum(num_malicious_nodes=f, num_nodes_to_select=n - f),
            "bulyan": s.Bulyan(num_malicious_nodes=f),
        }
        for name, strat in strategies.items():
            add(
                name,
                "flower",
                lambda: flower_replies(fl, x),
                lambda replies, strat=strat: strat.aggregate_train(1, replies)[0],
                lambda out: np.asarray(out.to_numpy_ndarrays()[0], dtype=np.float64),
                # Flower's Bulyan picks its rows by one-shot Multi-Krum, not Krum by Krum.
                comparable=name != "bulyan",
            )

    # ByzFL: the aggregator objects on the same tensor
    if byzfl is not None:
        b = byzfl
        objects: dict[str, Any] = {
            "mean": b["Average"](),
            "median": b["Median"](),
            "trimmed_mean": b["TrMean"](f=f),
            "geometric_median": b["GeometricMedian"](nu=0.1, T=3),
            "krum": b["Krum"](f=f),
            "multi_krum": b["MultiKrum"](f=f),
            "centered_clipping": b["CenteredClipping"](tau=100.0, L=1),
            "nnm": b["NNM"](f=f),
            "bucketing": b["Bucketing"](s=BUCKET_SIZE),
        }
        nnm_bytes = n * (n - f) * d * 4
        if nnm_bytes > nnm_limit_bytes:
            objects.pop("nnm")
            if skips is not None and "nnm" in aggregators and "byzfl" in impls:
                skips.append(
                    Skip(
                        "nnm",
                        "byzfl",
                        n,
                        d,
                        f"ByzFL's NNM indexes an (n, n - f, d) tensor: "
                        f"{nnm_bytes / 2**30:.1f} GiB, over the --byzfl-nnm-limit-gib",
                    )
                )
        for name, obj in objects.items():
            if name == "centered_clipping":
                # ByzFL's CenteredClipping keeps its last output as the next start; reset it
                # (untimed) so that every call does the same work as Phalanx's, from zero.
                def fresh(obj: Any = obj) -> torch.Tensor:
                    obj.m = None
                    return x

                add(name, "byzfl", fresh, obj, tensor_numpy)
            else:
                add(
                    name,
                    "byzfl",
                    same(),
                    obj,
                    tensor_numpy,
                    # ByzFL's Krum scores n - f - 1 neighbours (Phalanx and Flower: n - f - 2);
                    # its geometric median starts at zero (Phalanx: at the mean); bucketing is
                    # random in both.
                    comparable=name not in ("krum", "geometric_median", "bucketing"),
                )
    return cases


# --------------------------------------------------------------------------- timing


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


# --------------------------------------------------------------------------- memory


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} missing from /proc/self/status")


def _reset_high_water_mark() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def memory_child(spec: dict[str, Any]) -> dict[str, float]:
    """Peak resident memory (MiB above the resident size before the call) of each case."""
    n, d, impl = spec["n"], spec["d"], spec["impl"]
    byzfl = load_byzfl() if impl == "byzfl" else None
    fl = flower_setup() if impl == "flower" else None
    limit = spec["nnm_limit_bytes"]
    for case in build_cases(make_updates(n, 512), [impl], spec["aggregators"], byzfl, fl, limit):
        case.run(case.prepare())  # warm-up: lazy imports, thread pools, BLAS buffers
    gc.collect()
    gc.freeze()  # see main()
    x = make_updates(n, d)
    peaks: dict[str, float] = {}
    for case in build_cases(x, [impl], spec["aggregators"], byzfl, fl, limit):
        state = case.prepare()
        gc.collect()
        before = _status_kib("VmRSS")
        _reset_high_water_mark()
        out = case.run(state)
        peak = _status_kib("VmHWM")
        peaks[case.aggregator] = max(0, peak - before) / 1024
        del out, state
        gc.collect()
    return peaks


def measure_memory(
    n: int,
    d: int,
    impl: str,
    aggregators: Sequence[str],
    nnm_limit_bytes: float,
    one_process_per_rule: bool,
) -> dict[str, float]:
    env = dict(os.environ)
    if not one_process_per_rule:
        env["MALLOC_MMAP_THRESHOLD_"] = str(1 << 17)
    batches = [[a] for a in aggregators] if one_process_per_rule else [list(aggregators)]
    peaks: dict[str, float] = {}
    for batch in batches:
        spec = {
            "n": n,
            "d": d,
            "impl": impl,
            "aggregators": batch,
            "nnm_limit_bytes": nnm_limit_bytes,
        }
        done = subprocess.run(
            [sys.executable, __file__, "--memory-child", json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"memory child failed for {spec}:\n{done.stderr[-2000:]}")
        peaks.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return peaks


# --------------------------------------------------------------------------- detection (extra rows)


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


# --------------------------------------------------------------------------- report


def machine_note() -> list[str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if "model name" in line)
    except (OSError, StopIteration):
        pass
    import flwr

    versions = f"torch {torch.__version__}, numpy {np.__version__}, flwr {flwr.__version__}"
    try:
        from importlib.metadata import version

        versions += f", byzfl {version('byzfl')}"
    except Exception:  # pragma: no cover - byzfl absent
        pass
    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores",
        f"- threads: {THREADS} for every implementation (`torch.set_num_threads`, "
        "`OMP_NUM_THREADS`, `MKL_NUM_THREADS`, `OPENBLAS_NUM_THREADS`; Phalanx's sort pool "
        "follows `torch.get_num_threads()`). One thread by default because the two cores are "
        "shared with other work, where multi-threaded kernels spend their time waiting for "
        "descheduled threads; `--threads 2` measures both cores.",
        f"- Python {platform.python_version()}, {versions}",
        f"- {platform.platform()}",
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


def write_markdown(
    path: Path,
    rows: list[dict[str, Any]],
    skips: list[Skip],
    args: argparse.Namespace,
    load: tuple[str, str],
    wall: float,
    extra_note: str,
) -> None:
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
        *machine_note(),
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
        "leaves out the output; Phalanx returns a copy (d floats), so that a kept aggregate "
        "does not pin the whole (n, d) stack in memory.",
        "",
    ]
    path.write_text("\n".join(lines))


# --------------------------------------------------------------------------- main


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}"


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
    out = args.out or RESULTS / ("aggregation_quick" if args.quick else "aggregation")
    nnm_limit = args.byzfl_nnm_limit_gib * 2**30
    byzfl = load_byzfl() if "byzfl" in args.impls else None
    fl = flower_setup() if "flower" in args.impls else None
    # Flower's ArrayRecord.to_numpy_ndarrays(keep_input=False), used by its Bulyan, calls
    # gc.collect() once per reply; freezing the objects made by imports keeps that cost to
    # what a lean ServerApp process would pay, rather than what this harness would add.
    gc.collect()
    gc.freeze()

    started, load_before = time.perf_counter(), load_average()
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
                        n, d, impl, rules, nnm_limit, one_process_per_rule=not args.quick
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
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    write_markdown(
        out.with_suffix(".md"), rows, skips, args, (load_before, load_average()), wall, extra_note
    )
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')} in {wall:.0f} s")
    for line in goals(rows):
        print(line)


if __name__ == "__main__":
    main()
