"""``compression.md``: settings and caveats, the goal, a table per r, seeds, Flower agreement."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence

from benchmarks.lib.compression_goals import fp32_reference, goals, points, spread
from benchmarks.lib.compression_grid import (
    FLOWER,
    IN_PROCESS,
    SEED,
    SERVER_LR,
    K,
    Settings,
)
from benchmarks.lib.compression_runs import LATE_WINDOW, Row, model_parameters
from benchmarks.lib.results import Machine


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f}"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}"


def _table(rows: Sequence[Row]) -> list[str]:
    lines = [
        f"| method | final accuracy % | vs fp32 (points) | rounds {LATE_WINDOW} before the last, "
        "mean accuracy % | uplink MB | uplink KB / worker-round | reduction vs fp32 % "
        "| bits / param | downlink MB | flagged | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in rows:
        drop = points(x.accuracy_drop_vs_fp32)
        bits = _num(x.bits_per_param)
        accuracy = "failed" if x.final_accuracy is None else _pct(x.final_accuracy)
        lines.append(
            f"| {x.label} | {accuracy} | {drop} | {_pct(x.late_subset_accuracy)} | "
            f"{_mb(x.uplink_bytes)} | "
            f"{x.uplink_bytes_per_worker_round / 1e3:,.1f} | {_pct(x.reduction_vs_fp32)} | "
            f"{bits} | {_mb(x.downlink_bytes)} | {x.flagged} | {x.seconds:.0f} |"
        )
    return lines


def _broadcast_section(rows: Sequence[Row], full_rounds: int) -> list[str]:
    """How large the coordinator's compressed broadcast is, per predictive-coding run."""
    coded = [
        x
        for x in rows
        if x.method == "predictive coding"
        and x.transport == IN_PROCESS
        and x.rounds == full_rounds
        and x.error is None
        and x.seed == SEED
    ]
    if not coded:
        return []
    lines = [
        "## The predictive-coding downlink",
        "",
        "Round 1 sends the full weights; afterwards each task carries the compressed global "
        "delta. Bytes per task (K tasks a round), median over rounds 2 to the last:",
        "",
        "| method | r | broadcast bytes per task | bits / param | final accuracy % |",
        "|---|---|---|---|---|",
    ]
    for x in coded:
        per_task = statistics.median(d / K for d in x.downlink_by_round[1:])
        lines.append(
            f"| {x.label} | {x.r} | {per_task:,.0f} | {8 * per_task / x.parameters:.4f} | "
            f"{_pct(x.final_accuracy)} |"
        )
    starved = [x for x in coded if statistics.median(x.downlink_by_round[1:]) / K < 1000]
    if starved:
        lines += [
            "",
            f"{', '.join(f'{x.label} at r = {x.r}' for x in starved)}: a broadcast under a "
            "kilobyte carries next to nothing (the rate-distortion search found sending almost "
            "all zeros cheapest), so the global model barely moves and accuracy stalls; the "
            "workers' gradients then stay large and unpredictable, which is why such a run can "
            "spend more uplink bits than one at a lower lambda.",
        ]
    return [*lines, ""]


def _seeds_section(rows: Sequence[Row], full_rounds: int) -> list[str]:
    """Final accuracy per seed of every method that ran with more than one seed."""
    runs: dict[tuple[int, str], dict[int, Row]] = {}
    for x in rows:
        if x.transport == IN_PROCESS and x.rounds == full_rounds and x.error is None:
            runs.setdefault((x.r, x.label), {})[x.seed] = x
    repeated = {key: by_seed for key, by_seed in runs.items() if len(by_seed) > 1}
    if not repeated:
        return []
    seeds = sorted({seed for by_seed in repeated.values() for seed in by_seed})
    lines = [
        "## Seeds",
        "",
        "fp32 and the goal's candidates again under more seeds (each seed draws its own initial "
        "model, samples and codec draws; every method of one r and seed sees the same). *vs "
        "fp32*: the mean over seeds of the final accuracy minus fp32's under the same seed; "
        "*standard error*: of that mean, from the spread of the per-seed differences.",
        "",
        f"| method | r | {' | '.join(f'final accuracy %, seed {s}' for s in seeds)} | mean % "
        "| vs fp32 (points) | standard error (points) | reduction vs fp32 % | bits / param |",
        f"|---|---|{'---|' * len(seeds)}---|---|---|---|---|",
    ]
    for (r, label), by_seed in sorted(repeated.items()):
        finals = [by_seed[s].final_accuracy for s in seeds if s in by_seed]
        mean = statistics.fmean(f for f in finals if f is not None)
        drops = [
            x.accuracy_drop_vs_fp32 for x in by_seed.values() if x.accuracy_drop_vs_fp32 is not None
        ]
        reductions = [
            x.reduction_vs_fp32 for x in by_seed.values() if x.reduction_vs_fp32 is not None
        ]
        bits = [x.bits_per_param for x in by_seed.values() if x.bits_per_param is not None]
        cells = [_pct(by_seed[s].final_accuracy) if s in by_seed else "—" for s in seeds]
        lines.append(
            f"| {label} | {r} | {' | '.join(cells)} | {_pct(mean)} | "
            f"{points(statistics.fmean(drops)) if drops else '—'} | {spread(drops)} | "
            f"{_pct(statistics.fmean(reductions)) if reductions else '—'} | "
            f"{_num(statistics.fmean(bits)) if bits else '—'} |"
        )
    return [*lines, ""]


def _flower_section(rows: Sequence[Row]) -> list[str]:
    flower = next((x for x in rows if x.transport == FLOWER), None)
    if flower is None:
        return []
    twin = next(
        (
            x
            for x in rows
            if x.transport == IN_PROCESS
            and x.label == flower.label
            and x.r == flower.r
            and x.rounds == len(flower.uplink_by_round)
            and x is not flower
        ),
        None,
    )
    lines = [
        f"## Flower's simulation engine against the in-process test double ({flower.label}, "
        f"r = {flower.r}, {flower.rounds} rounds)",
        "",
    ]
    if flower.error is not None:
        return [*lines, f"The Flower run failed: {flower.error}", ""]
    if twin is None:
        return [*lines, "No in-process run of the same config to compare with.", ""]
    lines += [
        "| round | uplink bytes, Flower | uplink bytes, in-process | difference | downlink bytes, "
        "Flower | downlink bytes, in-process | difference | same model digest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t, (fu, iu, fd, id_, fg, ig) in enumerate(
        zip(
            flower.uplink_by_round,
            twin.uplink_by_round,
            flower.downlink_by_round,
            twin.downlink_by_round,
            flower.digest_by_round,
            twin.digest_by_round,
            strict=False,
        ),
        start=1,
    ):
        lines.append(
            f"| {t} | {fu:,} | {iu:,} | {fu - iu:+,} | {fd:,} | {id_:,} | {fd - id_:+,} | "
            f"{'yes' if fg == ig else 'NO'} |"
        )
    same = flower.digest_by_round == twin.digest_by_round
    # What Flower sent beyond the double, per task (K a round): read from the runs, not from
    # today's RunConfig, whose JSON grows as settings are added.
    per_task = sorted(
        {
            (fd - id_) / K
            for fd, id_ in zip(flower.downlink_by_round, twin.downlink_by_round, strict=False)
        }
    )
    extra = f"{per_task[0]:,.0f}" + ("" if len(per_task) == 1 else f" to {per_task[-1]:,.0f}")
    lines += [
        "",
        f"Same model after every round: **{'yes' if same else 'NO'}** (so the same payloads "
        "went up: the codec is deterministic and the next model is a function of them). "
        "Uplink differences come from the ECDSA signatures alone: DER-encoded P-256 signatures "
        "are randomised and 70 to 72 bytes long. Downlink differences are the run config "
        f"that Flower's transport sends (and counts) with every task ({extra} bytes "
        "here) and the in-process double does not. Final accuracy: Flower "
        f"{_pct(flower.final_accuracy)} %, in-process {_pct(twin.final_accuracy)} %.",
        "",
    ]
    return lines


def markdown(
    rows: Sequence[Row],
    notes: Sequence[str],
    full_rounds: int,
    *,
    stem: str = "compression",
) -> str:
    """compression.md: settings, the goal, one table and one plot per r, Flower agreement.

    The plot of each r is linked as ``STEM_rR.png``.
    """
    lines = [
        "# Uplink compression against accuracy (Fashion-MNIST CNN, K = 15)",
        "",
        *notes,
        "",
        "## Goal: at least 99 % less uplink than fp32, at most 1 point lower final accuracy",
        "",
    ]
    for g in goals(rows, full_rounds):
        lines.append(f"- r = {g.r}: **{'met' if g.met else 'NOT met'}**, {g.detail}.")
    for r, title in ((1, "r = 1 (scheme `none`)"), (3, "r = 3 (scheme `bibd`, STS(15))")):
        mine = [
            x
            for x in rows
            if x.r == r and x.transport == IN_PROCESS and x.rounds == full_rounds and x.seed == SEED
        ]
        mine += [x for x in rows if x.r == r and x.error is not None and x not in mine]
        if not mine:
            continue
        lines += ["", f"## {title}", "", *_table(mine), "", f"![{title}]({stem}_r{r}.png)"]
    lines += [
        "",
        *_seeds_section(rows, full_rounds),
        *_broadcast_section(rows, full_rounds),
        *_flower_section(rows),
    ]
    return "\n".join(lines).rstrip() + "\n"


def describe(
    settings: Settings,
    rows: Sequence[Row],
    jobs: int,
    minutes: float,
    quick: bool,
    *,
    host: Machine,
    load: float,
    torch_version: str | None,
    rewritten: bool = False,
    rerun: Sequence[str] = (),
    stem: str = "compression",
) -> list[str]:
    """The settings and caveats that head compression.md.

    ``host``, ``load`` (its load average at the end) and ``torch_version``
    describe the machine that writes the report. ``rerun`` lists the labels
    that ``--only`` ran and merged into the rows of an earlier ``STEM.json``
    (``minutes`` is then the rerun's time).
    """
    zstd_same = [
        (x.r, x.digest_by_round[-1:] == ref.digest_by_round[-1:])
        for x in rows
        if x.method == "zstd" and (ref := fp32_reference(rows, x.r)) is not None and x.error is None
    ]
    flagged = {
        (x.r, x.label): x.flagged
        for x in rows
        if x.flagged and x.transport == IN_PROCESS and x.seed == SEED
    }
    command = f"python benchmarks/eval_compression.py{' --quick' if quick else ''}"
    machine = (
        f"({jobs} process{'es' if jobs > 1 else ''}, one torch thread each) on "
        f"{host.architecture} with {host.cores} cores shared with other work (load average "
        f"{load:.1f} at the end). Python {host.python}, torch {torch_version}."
    )
    if rewritten:
        head = (
            f"Rewritten from {stem}.json by `--report-only`; its runs took "
            f"{minutes:.1f} minutes of run time in all."
        )
    elif rerun:
        only = " ".join(f"--only '{label}'" for label in rerun)
        head = (
            f"Rows of {'; '.join(rerun)} rerun by `{command} {only} --jobs {jobs}` in "
            f"{minutes:.1f} minutes {machine} The other rows come from the previous "
            f"{stem}.json; all runs took {sum(x.seconds for x in rows) / 60:.1f} minutes "
            "of run time in all."
        )
    else:
        head = f"Generated by `{command} --jobs {jobs}` in {minutes:.1f} minutes {machine}"
    lines = [
        head,
        "",
        f"**Setup.** Fashion-MNIST, the small CNN ({model_parameters():,} parameters), K = {K} "
        f"workers, no attack, {settings.rounds} rounds, seed {settings.seed}; each file's update "
        f"is the gradient over its samples ({settings.samples_per_file[1]} per file at r = 1: "
        f"15 files, {15 * settings.samples_per_file[1]} samples a round; "
        f"{settings.samples_per_file[3]} per file at r = 3: 35 files, "
        f"{35 * settings.samples_per_file[3]} samples a round); the mean of the accepted files "
        f"goes to Adam on the server (lr {settings.server_lr}"
        + (
            ", fp32's best of 0.002, 0.004 and 0.008 over three seeds at r = 1 and at r = 3"
            if settings.server_lr == SERVER_LR
            else ""
        )
        + f"). Accuracy is measured on the first {settings.eval_samples} test images each round "
        "and on all 10,000 after the last round (*final accuracy*). Every run of one r and "
        "seed starts from the same model and sees the same samples. At this stage of training "
        "fp32's accuracy still moves by a point or two from one round to the next (see the "
        "plots) and from one seed to another: a difference of about a point in final accuracy "
        "is within the noise of a single run. "
        + (
            f"The tables and plots show seed {settings.seed}; fp32 and the goal's candidates ran "
            "under more seeds (section *Seeds*), and the goal is judged on each method's mean "
            "over its seeds, among the methods that ran with the most seeds. "
            if settings.seeds > 1
            else ""
        )
        + f"The column *rounds {LATE_WINDOW} before the last* averages the subset accuracy of "
        "those rounds.",
        "",
        "**Transport.** All table rows run on the in-process transport "
        "(`phalanx_clients.inprocess.InProcessTransport`, a test double of Flower's runtime: "
        "the same coordinator, workers, signatures, detection and codec in one process). "
        "Shortcut: the r workers of a file share one computation of its gradient (a pure "
        "function of model, round and file), but each worker encodes, signs and sends its own "
        "payload. The Flower section below checks one predictive-coding run against Flower's "
        "simulation engine, which takes no shortcut.",
        "",
        "**Bytes.** *uplink MB*: the sum over rounds and workers of the round reports' "
        "`bytes_up` (payloads plus a 64-byte hex SHA-256 digest per payload and a 70 to 72 "
        "byte ECDSA signature per reply). *uplink KB / worker-round*: that divided by "
        f"{K} x rounds (at r = 3 a worker sends 7 payloads a round). *bits / param*: payload "
        "bytes only, 8 x payload bytes / (payloads x parameters). *reduction vs fp32*: 1 - "
        "uplink / fp32's uplink at the same r. *downlink*: the full float32 weights to every "
        "worker every round for the baselines (their channel is the plain one), the compressed "
        "global delta for predictive coding (after a full first round).",
        "",
        "**Methods.** *zstd*: level 3 on the float32 bytes (lossless; final model equal to "
        "fp32's bit for bit: "
        + (", ".join(f"r = {r} {'yes' if ok else 'NO'}" for r, ok in zstd_same) or "not run")
        + "). *qsgd*: s levels of each 512-coordinate bucket's L2 norm, stochastic rounding "
        "seeded from (run seed, round, file) so that replicas agree, the signed levels "
        "ANS-coded (`constriction`) under their empirical frequencies; the bucket norms and the "
        "frequency table are in the payload. *top-k + EF*: the 0.5 % largest magnitudes of "
        "update + carried error, float32 values and Elias-gamma-coded index gaps. **r = 1 "
        "only**: with error feedback a worker's payload depends on its private error memory "
        "(the files it computed before), so honest replicas of a file would send different "
        "bytes, disagree, and be flagged; the same holds for the codec's own "
        "`error_feedback`, which the run config refuses with r > 1. *signsgd*: one bit per "
        "coordinate plus each layer's mean magnitude (float32), aggregated by the mean rule "
        "(not majority vote). *predictive coding*: `config.codec` with `enabled = true`, "
        "`rd_lambda` = *lambda* and, where the row gives one, `downlink_rd_lambda` = "
        "*downlink_lambda*, `unbiased` = *unbiased* (stochastic rounding of the uplink), "
        "`step_sizes` = the default steps plus *extra_step* (in multiples of the residual's "
        "RMS) and `rd_distortion` = *rd_distortion* (`layer`: each layer's error against its "
        "own energy, as Adam on the server sees it, instead of against the whole update's) "
        "and `rounding` = *rounding* (`correlated`: the files of a round share their "
        "stochastic-rounding draws, each file shifted by its index along a golden-ratio "
        "sequence, so that the rounding errors partly cancel in the mean; each payload stays "
        "unbiased and replicas still agree byte for byte), `low_rank` = *low_rank* (a 2-D "
        "layer, here `classifier.1.weight`, 128 x 3136, may go as its top singular directions: "
        "two factors of that rank, each rounded to a quarter of its RMS and ANS-coded, when "
        "that costs less in J) and `error_feedback` = *error_feedback* (the worker carries "
        "what the low-rank truncation left out into its next update; layers rounded "
        "stochastically carry nothing), every other codec setting at its "
        "default. The workers code their updates at "
        "`rd_lambda`, the coordinator its broadcast of the global delta at "
        "`downlink_rd_lambda` (at `rd_lambda` too where the row gives none); decoding does "
        "not depend on lambda. Every row is a plain run config.",
    ]
    if flagged:
        lines += [
            "",
            "**Flagged honest workers.** With r = 1 detection can only score outliers "
            "(robust z-score, `detection.mode = auto`); honest workers it flagged were left "
            "out of those rounds: "
            + ", ".join(f"{label} (r = {r}): {n}" for (r, label), n in flagged.items())
            + ". At r = 3 any flag would mean honest replicas disagreed.",
        ]
    return lines


def log_row(row: Row) -> None:
    """One line on stderr per finished run."""
    sys.stderr.write(
        f"{'flower' if row.transport == FLOWER else 'local':<6} r={row.r} {row.label:<42} "
        f"rounds={row.rounds:<3} acc={_pct(row.final_accuracy)} "
        f"up={_mb(row.uplink_bytes)}MB bits={_num(row.bits_per_param)} "
        f"flagged={row.flagged} {row.seconds:.0f}s{' ' + row.error if row.error else ''}\n"
    )
