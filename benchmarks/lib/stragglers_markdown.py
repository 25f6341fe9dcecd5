"""``stragglers.md``: what ran and how, the goals, Flower's agreement, every run per workload."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from benchmarks.lib.results import Machine, hosts
from benchmarks.lib.robustness_goals import pct
from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS
from benchmarks.lib.stragglers_goals import (
    ACCURACY_POINTS,
    TIME_GOALS,
    Comparison,
    agreements,
    comparisons,
    goals,
    grid_rows,
    points_text,
    ratio_text,
    target_round,
)
from benchmarks.lib.stragglers_grid import (
    ATTACK,
    DEADLINE_MARGIN,
    NETWORK,
    PROFILES,
    ROUND_SIGMA,
    TRACE,
    WORKLOADS,
    Q,
    fastest_count,
)
from benchmarks.lib.stragglers_runs import REFUSED, Row

TITLE = "# Stragglers: collection policies against waiting for every reply"


def plot_name(stem: str, workload: str) -> str:
    """File name of a workload's plot beside the report: ``STEM_WORKLOAD.png``."""
    return f"{stem}_{workload}.png"


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def policy_text(row: Row) -> str:
    """The policy with the parameters it ran with, e.g. ``fastest_k (k = 12)``."""
    shown = {k: v for k, v in row.collect.items() if k != "group_selection"}
    if not shown:
        return row.policy
    return f"{row.policy} ({', '.join(f'{k} = {v}' for k, v in shown.items())})"


def _profile(key: str, *, short: bool = False) -> str:
    profile = next((p for p in PROFILES if p.key == key), None)
    if profile is None:
        return key
    return profile.short if short else profile.label


def markdown(rows: Sequence[Row], notes: Sequence[str], *, stem: str = "stragglers") -> str:
    """stragglers.md: settings, goals, the transports' agreement, and a table and plot per workload.

    The plot of each workload is linked as ``STEM_WORKLOAD.png`` (:func:`plot_name`).
    """
    lines = [TITLE, "", *notes, "", "## Goals", ""]
    for g in goals(rows):
        lines.append(f"- **{'met' if g.met else 'NOT met'}**: {g.text}: {g.detail}.")
    footnotes: list[str] = []
    lines += _flower_section(rows, footnotes)
    against = {id(c.row): c for c in comparisons(rows)}
    grid = grid_rows(rows)
    for w in WORKLOADS:
        mine = [r for r in grid if r.workload == w.key]
        if not mine:
            continue
        lines += [
            "",
            f"## {w.label}",
            "",
            f"![{w.label}: accuracy against simulated time]({plot_name(stem, w.key)})",
            "",
            "| profile | attack | scheme | policy | target (%) | time to target (s) | x `all` "
            "| final accuracy (%) | vs `all` (points) | simulated time (s) | late | missing "
            "| precision | recall | honest stragglers flagged |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            lines.append(_row_line(r, against.get(id(r)), footnotes))
    if footnotes:
        lines += ["", *(f"[{i}] {text}" for i, text in enumerate(footnotes, 1))]
    return "\n".join(lines) + "\n"


def _mark(row: Row, footnotes: list[str]) -> str:
    """`` [n]``: the footnote with the row's note or error (one per distinct text), or ``""``."""
    text = row.note or row.error
    if not text:
        return ""
    if text not in footnotes:
        footnotes.append(text)
    return f" [{footnotes.index(text) + 1}]"


def _row_line(r: Row, comparison: Comparison | None, footnotes: list[str]) -> str:
    mark = _mark(r, footnotes)
    ratio = ratio_text(comparison.time_ratio) if comparison else "—"
    points = points_text(comparison.accuracy_points) if comparison else "—"
    attack = "none" if r.q == 0 else f"{r.attack}, q = {r.q}"
    target = "—" if r.error or r.target_accuracy is None else pct(r.target_accuracy)
    honest = set(r.stragglers) - set(r.adversaries)
    flagged = "—" if not honest else f"{len(r.stragglers_flagged)} of {len(honest)}"
    return (
        f"| {_profile(r.profile, short=True)} | {attack} | {r.scheme} (r = {r.r}) "
        f"| {policy_text(r)}{mark} | {target} | {_num(r.time_to_target_s, 1)} | {ratio} "
        f"| {pct(r.final_accuracy) if r.error is None else '—'} | {points} "
        f"| {_num(r.simulated_time_s, 1)} | {r.late_replies} | {r.missing_replies} "
        f"| {_num(r.precision, 2)} | {_num(r.recall, 2)} | {flagged} |"
    )


def _flower_section(rows: Sequence[Row], footnotes: list[str]) -> list[str]:
    pairs = agreements(rows)
    if not pairs:
        return []
    lines = [
        "",
        "## Flower's simulation engine against the in-process test double",
        "",
        "The same run on both transports: the model digest, the flagged workers, and the late "
        "and missing replies compared round by round, and the simulated clocks' largest "
        "relative difference (Flower's download also carries the run config, so its "
        "broadcast, and the clock, are a few kilobytes longer).",
        "",
        "| policy | scheme | rounds | accuracy, in-process | accuracy, Flower | same model every "
        "round | same flagged | same late and missing | clock gap | seconds, in-process "
        "| seconds, Flower |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        a, b = p.inprocess, p.flower
        mark = _mark(b, footnotes) or _mark(a, footnotes)
        if a.error and b.error and a.error.startswith(REFUSED) and b.error.startswith(REFUSED):
            lines.append(
                f"| {a.policy}{mark} | {a.scheme} | {a.rounds} | refused | refused | — | — | — "
                "| — | — | — |"
            )
            continue
        gap = p.clock_gap
        lines.append(
            f"| {policy_text(a)}{mark} | {a.scheme} | {a.rounds} | {pct(a.final_accuracy)} "
            f"| {pct(b.final_accuracy)} | {_yes(p.same_models)} | {_yes(p.same_flagged)} "
            f"| {_yes(p.same_late)} | {'—' if gap is None else f'{gap:.1e}'} "
            f"| {a.seconds:.0f} | {b.seconds:.0f} |"
        )
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def describe(
    rows: Sequence[Row],
    *,
    jobs: int,
    minutes: float,
    quick: bool,
    host: Machine,
    load: float,
    torch_version: str | None,
    rewritten: bool = False,
) -> list[str]:
    """The paragraphs above the tables: what ran, with which settings, and the definitions.

    ``host``, ``load`` (its 1-minute load average) and ``torch_version`` describe
    the machine that writes the report; ``rewritten``: the report was rebuilt
    from stored rows (``--report-only``).
    """
    local = [r for r in rows if r.transport == IN_PROCESS]
    grid = grid_rows(rows)
    flower = [r for r in rows if r.transport == FLOWER]
    refused = sorted({r.policy for r in rows if r.error and r.error.startswith(REFUSED)})
    failed = [r for r in rows if r.error and not r.error.startswith(REFUSED)]
    lengths = ", ".join(
        f"{n} for {w.key}"
        for w in WORKLOADS
        for n in sorted({r.rounds for r in grid if r.workload == w.key})
    )
    flower_rounds = ", ".join(str(n) for n in sorted({r.rounds for r in flower}))
    spent = sum(r.seconds for r in local) / 60
    first = (
        f"{'Quick grid (`--quick`): ' if quick else ''}{len(grid)} runs of the grid on the "
        "in-process transport (`phalanx_clients.inprocess`, a test double of Flower's "
        f"runtime), {sum(1 for r in grid if r.error and r.error.startswith(REFUSED))} of them "
        f"refused by the platform; rounds: {lengths}."
    )
    if flower:
        first += (
            f" {len(flower)} run(s) through Flower's simulation engine, of {flower_rounds} "
            "rounds, each beside an in-process twin."
        )
    timing = (
        f" Rewritten from the stored rows: {spent:.0f} min of in-process runs, each run's own "
        f"time (the rows do not say how many ran at once), on {hosts(r.host for r in rows)}, "
        f"{host.cores} cores shared with other work; torch {torch_version}"
        if rewritten
        else f" In all {minutes:.0f} min ({spent:.0f} min of in-process runs on {jobs} "
        f"process(es)) on {host.cpu}, {host.cores} cores shared with other work (load average "
        f"{load:.1f} at the end); torch {torch_version}"
    )
    first += f"{timing} on one thread per process, {host.architecture}." + (
        f" {len(failed)} run(s) failed (footnotes)." if failed else ""
    )
    return [
        first,
        "",
        _workloads_paragraph(),
        "",
        _profiles_paragraph(),
        "",
        _policies_paragraph(refused),
        "",
        _definitions_paragraph(grid),
    ]


def _workloads_paragraph() -> str:
    parts = []
    for w in WORKLOADS:
        layouts = (
            f"`{w.main.scheme}` (r = {w.main.r}, {w.main.samples_per_file} samples a file)"
            if w.main == w.groups
            else f"`{w.main.scheme}` (r = {w.main.r}, {w.main.samples_per_file} samples a file) "
            f"and, for `group_fastest` and its `all`, `{w.groups.scheme}` (r = {w.groups.r}, "
            f"{w.groups.samples_per_file} samples a file)"
        )
        parts.append(
            f"*{w.label}*: {w.rounds} rounds, Adam on the server at {w.server_lr}, "
            f"assignment {layouts}"
        )
    return (
        "**Workloads.** "
        + "; ".join(parts)
        + ". Workers send gradients (one local step); the robust rule and detection are the "
        'platform\'s defaults (trimmed mean at `f = "auto"`, evidence across rounds); '
        f"accuracy is read on the first {WORKLOADS[0].eval_samples} test samples after every "
        "round and on all 10,000 after the last (*final accuracy*). Seed 2026 everywhere. The "
        "group of 4 at K = 100: no Steiner triple system (K is not 1 or 3 mod 6) nor MOLS "
        "design (no r with K / r a prime above r) has 100 workers, and `subsets` would give "
        "C(100, 3) files."
    )


def _profiles_paragraph() -> str:
    a, b, c = PROFILES
    sa, sb, sc, net = dict(a.settings), dict(b.settings), dict(c.settings), dict(NETWORK)
    return (
        f"**Profiles** (`systems`; every worker's compute time is also multiplied each round "
        f"by a log-normal factor of mean 1 and log-deviation {ROUND_SIGMA}). {a.label}: "
        f"{1000 * sa['speed_shift_s']:g} ms + {1000 * sa['speed_scale_s']:g} ms x Exp(1) per "
        f"sample, drawn once per worker; {b.label}: {1000 * sb['speed_scale_s']:g} ms per "
        f"sample, {100 * sb['straggler_fraction']:g} % of the workers (chosen by the seed) "
        f"{sb['straggler_slowdown']:g} times slower; both with links of "
        f"{8 * net['up_bytes_per_s'] / 1e6:g} Mbit/s up and "
        f"{8 * net['down_bytes_per_s'] / 1e6:g} Mbit/s down and "
        f"{1000 * net['latency_s']:g} ms latency, so that compute dominates (a `bibd` "
        "worker's 7 CNN updates take about 0.9 s to upload, its 98 samples about 1 s to "
        f"compute). {c.label}: the shipped trace `examples/traces/{TRACE.name}` (rows 0..K-1 "
        "of its 100 made-up devices: speeds, links and latencies, a tenth of them ten times "
        f'slower) with `availability = "dropout"` and `dropout_probability = '
        f"{sc['dropout_probability']:g}` (`SystemsConfig` takes a trace and an availability "
        "model together); its uplinks of 0.1 to 10 MB/s make uploads dominate."
    )


def _policies_paragraph(refused: Sequence[str]) -> str:
    k15, k100 = (fastest_count(w.num_workers) for w in WORKLOADS)
    text = (
        "**Policies** (`collect`). `all` waits for every reply (a worker away this round "
        "never replies: the round closes at the last arrival); `deadline` closes at "
        f"{DEADLINE_MARGIN} x the typical arrival of the ceil(0.8 K)-th worker (the systems "
        "model's clock with no jitter and nobody away; the value is in each row); `fastest_k` "
        f"waits for k = ceil(0.8 K) whole replies ({k15} of 15, {k100} of 100); `adaptive_k` "
        "starts at K // 2 and grows by max(1, K // 20) at each error floor; `quorum` waits "
        "until every file has m agreeing replicas, m a majority of r; `group_fastest` (G-CADA) "
        "waits for the fastest worker of every group, on the `groups` scheme, and its lazy "
        "form for the groups CADA's rule selects; `bandit` gives work to the k = ceil(0.8 K) "
        "workers a UCB bandit of response times picks. A late reply is counted, never judged. "
        "Not a policy but the asynchronous mode (`asynchronous`, r = 1 only, on the MLP): "
        "its model moves every 50 arrivals, a worker holding one slot of a buffer, beside "
        "`all` at r = 1 (scheme `none`, 64 samples a worker); `asynchronous` keeps its default "
        "staleness bound (10 versions, the delay-adaptive step), `asynchronous-fresh` drops "
        "every update computed on an older model (`max_staleness = 0`). One of its rounds is "
        "one model update: half the work of a round of `all`."
    )
    if refused:
        text += (
            f" The platform refuses {', '.join(f'`{p}`' for p in refused)} for now (policies "
            "with state that runs do not carry yet): their rows say so and carry no figures."
        )
    return text


def _definitions_paragraph(rows: Sequence[Row]) -> str:
    rounds = sorted({r.rounds for r in rows if r.transport == IN_PROCESS})
    at = ", ".join(f"{target_round(n)} of {n}" for n in rounds)
    goals = ", ".join(f"{_profile(p)} {x}x" for p, x in TIME_GOALS.items())
    return (
        "**Columns.** *target*: the accuracy `all` reaches at 80 % of its rounds (its accuracy "
        f"after round floor(0.8 R): {at}), per workload, scheme, profile and attack; *time to "
        "target*: the simulated time (`simulated_total_s`) after the first round whose "
        "accuracy reaches it, — when none does; *x `all`*: that time over `all`'s (goals: "
        f"{goals}); *vs `all`*: final accuracy minus `all`'s at the same rounds (goal: at "
        f"least -{ACCURACY_POINTS:g}); *simulated time*: the run's simulated seconds; *late*, "
        "*missing*: replies that arrived after their round closed, and replies of workers "
        "away, summed over the rounds; *precision*, *recall*: of the workers flagged in any "
        f"round against the adversaries ({ATTACK}, q = {Q}, chosen at random, every one "
        "distorting every file it computes; 1.00 by convention for an empty set); *honest "
        "stragglers flagged*: persistent stragglers (`phalanx.systems.draw_profiles`, only "
        "profile (b) has them) that are not adversaries, among the flagged workers (an "
        "adversary that is also slow is rightly flagged)."
    )


def log_row(row: Row) -> None:
    """One line on stderr per finished run."""
    sys.stderr.write(
        f"{'flower' if row.transport == FLOWER else 'local':<6} {row.workload:<8} "
        f"{row.scheme:<6} {row.profile:<21} {row.policy:<20} {row.attack:<5} "
        f"acc={pct(row.final_accuracy) if row.error is None else '-'} "
        f"sim={_num(row.simulated_time_s, 1)}s late={row.late_replies} "
        f"P={_num(row.precision, 2)} R={_num(row.recall, 2)} {row.seconds:.0f}s"
        f"{' ' + row.error if row.error else ''}\n"
    )
