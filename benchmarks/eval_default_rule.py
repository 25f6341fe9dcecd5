"""What the default robust rule after detection costs without attack, and saves under one.

The default run configuration (STS(15): 15 workers, 35 files, r = 3, relabelling on,
the evidence across rounds at its default bound) aggregates the accepted files with
the trimmed mean at ``f = "auto"``. Each pair (`benchmarks.lib.default_rule`) runs it
beside the plain mean, same seed, same data, on Fashion-MNIST's MLP for 20 rounds on
the in-process transport: without attack, and under the colluders of issue 17's
report (3 of them lie only where they hold a file's majority, updates reversed and
scaled by 100). The table gives default minus mean in accuracy points, per seed and
averaged; the runs are deterministic, so a re-run on the same torch build and CPU gives the
same figures.

Writes ``benchmarks/results/default_rule.json`` and ``default_rule.md``
(``default_rule_quick.*`` with ``--quick``: one seed, 5 rounds). About ten minutes on
two cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import torch

from benchmarks.lib.default_rule import ROUNDS, SEEDS, Case, Outcome, cases, markdown, summarize
from benchmarks.lib.inprocess_sharing import ReportSink
from benchmarks.lib.results import RESULTS, machine, report_path, write_json, write_markdown
from benchmarks.lib.robustness_runs import in_process_transport
from phalanx.runs import execute_run
from phalanx.runs import summarize as summarize_run


def run_case(case: Case) -> Outcome:
    """Run one case end to end; a failure becomes an outcome with its error."""
    torch.set_num_threads(1)  # as the ClientApp does: one thread, so replicas agree bit for bit
    config = case.config()
    sink = ReportSink()
    started = time.perf_counter()
    try:
        execute_run(
            config,
            run_id=case.run_id,
            sink=sink,
            transport=in_process_transport(config, case.run_id),
        )
    except Exception as exc:  # the evaluation goes on; the outcome says what failed
        error = f"{type(exc).__name__}: {exc}"
        seconds = round(time.perf_counter() - started, 2)
        return Outcome(case.setting.name, case.seed, case.rule, None, None, seconds, error)
    used = [r.metrics["f_used"] for r in sink.reports if r.metrics["f_used"] >= 0]
    return Outcome(
        setting=case.setting.name,
        seed=case.seed,
        rule=case.rule,
        final_accuracy=summarize_run(config, case.run_id, sink.reports).final_accuracy,
        mean_f_used=statistics.fmean(used) if used else None,
        seconds=round(time.perf_counter() - started, 2),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, 5 rounds")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    todo = cases(SEEDS[:1], 5) if args.quick else cases(SEEDS, ROUNDS)
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=context) as pool:
        outcomes = list(pool.map(run_case, todo))
    for o in outcomes:
        print(f"{o.setting:32} seed={o.seed} {o.rule:7} acc={o.final_accuracy} {o.seconds:.0f}s")
    minutes = (time.perf_counter() - started) / 60
    summaries = summarize(outcomes)
    host = machine()
    rounds = todo[0].rounds
    seeds = ", ".join(str(s) for s in sorted({c.seed for c in todo}))
    notes = (
        f"{rounds} rounds per run, seeds {seeds}; {len(todo)} runs in {minutes:.1f} min with "
        f"{args.jobs} at a time on {host.cpu} ({host.cores} cores, {host.architecture}), "
        f"torch {version('torch')}. The default configuration but for `[aggregation]`: "
        "STS(15), relabelling on, the evidence across rounds at its default bound (7), "
        'Fashion-MNIST\'s MLP, 14 samples per file. *mean*: `rule = "mean"`, `f = 0`; '
        '*default*: `trimmed_mean` at `f = "auto"` (in each round the most accepted files 7 '
        "unproven liars could have supplied between them: 5 of the 35 on the built-in "
        "STS(15), fewer once liars are proven). Accuracy in percent; the difference in "
        "points, default minus mean, per seed and averaged (the spread over the seeds is "
        "what a run's trajectory alone moves it)."
    )
    write_json(
        report_path(args.out, "default_rule", ".json", quick=args.quick),
        [asdict(o) for o in outcomes],
    )
    write_markdown(
        report_path(args.out, "default_rule", ".md", quick=args.quick),
        markdown(summaries, notes),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
