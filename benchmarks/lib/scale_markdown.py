"""``scale.md``: the table of ``bench_scale.py``'s rows and the issue's goals against them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GOAL_GROWTH = 11.0
"""Round time at K = 1,000 over K = 100, at most (linear in K, with a tenth to spare)."""
GOAL_FLOWER = 1.5
"""Flower's round over the in-process one, at most."""
GOAL_EVENT_BYTES = 2048.0
"""Database bytes per detection event, at most."""


def _num(value: float | None, digits: int = 2) -> str:
    if value is None or value != value:
        return "–"
    return f"{value:,.{digits}f}"


def _rows_by(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int, int], Mapping[str, Any]]:
    return {(row["transport"], row["r"], row["K"]): row for row in rows}


def table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per row, ordered by transport, r and K."""
    lines = [
        "| transport | r | K | round (s) | CPU per round (s) | per worker (ms) | training share "
        "| coordinator's own "
        "work (s) | workers' overhead (s) | training (s) | peak RSS (MB) | DB bytes per round | "
        "DB bytes per event | evidence bytes per event | precision | recall | startup (s) | "
        "load (1 min) | measured |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda x: (x["transport"], x["r"], x["K"])):
        lines.append(
            f"| {row['transport']} | {row['r']} | {row['K']:,} | {_num(row['round_s'])} | "
            f"{_num(row.get('cpu_s_per_round'))} | {_num(row['per_worker_ms'], 1)} | "
            f"{_num(100 * row['training_share'], 0)} % | "
            f"{_num(row['own_work_s'])} | {_num(row['worker_overhead_s'])} | "
            f"{_num(row['training_s'])} | {_num(row['peak_rss_mb'], 0)} | "
            f"{_num(row['db_bytes_per_round'], 0)} | {_num(row['bytes_per_event'], 0)} | "
            f"{_num(row['evidence_bytes_per_event'], 0)} | {_num(row['precision'])} | "
            f"{_num(row['recall'])} | {_num(row['startup_s'], 1)} | "
            f"{_num(row['load_average'][0], 1)}–{_num(row['load_average'][1], 1)} | "
            f"{row['measured']} |"
        )
    return lines


def goals(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The issue's goals, each with the figures it is judged on (``–`` where a row is missing)."""
    by = _rows_by(rows)
    lines = []
    for transport in sorted({row["transport"] for row in rows}):
        for r in sorted({row["r"] for row in rows}):
            low, high = by.get((transport, r, 100)), by.get((transport, r, 1000))
            if low and high:
                growth = high["round_s"] / low["round_s"]
                verdict = "met" if growth <= GOAL_GROWTH else "NOT met"
                lines.append(
                    f"- Round time K = 1,000 / K = 100, {transport}, r = {r}: "
                    f"**{growth:.1f}x** (goal at most {GOAL_GROWTH:.0f}x: {verdict})."
                )
            if high:
                cost = high["own_work_s"] + high["worker_overhead_s"]
                verdict = "met" if cost <= high["training_s"] else "NOT met"
                lines.append(
                    f"- Coordinator's own work + workers' overhead at K = 1,000, {transport}, "
                    f"r = {r}: {cost:.2f} s against {high['training_s']:.2f} s of training "
                    f"(goal: at most the training: {verdict})."
                )
    for r in sorted({row["r"] for row in rows}):
        for k in sorted({row["K"] for row in rows}):
            ours, theirs = by.get(("in-process", r, k)), by.get(("flower", r, k))
            if ours and theirs:
                ratio = theirs["round_s"] / ours["round_s"]
                verdict = "met" if ratio <= GOAL_FLOWER else "NOT met"
                cpu = ""
                if theirs.get("cpu_s_per_round") and ours.get("cpu_s_per_round"):
                    cpu_ratio = theirs["cpu_s_per_round"] / ours["cpu_s_per_round"]
                    cpu = f"; CPU per round {cpu_ratio:.2f}x"
                lines.append(
                    f"- Flower / in-process, r = {r}, K = {k:,}: **{ratio:.2f}x** "
                    f"(goal at most {GOAL_FLOWER}: {verdict}){cpu}."
                )
    per_event = [row["bytes_per_event"] for row in rows if row["bytes_per_event"] is not None]
    if per_event:
        verdict = "met" if max(per_event) <= GOAL_EVENT_BYTES else "NOT met"
        lines.append(
            f"- Database bytes per event: {min(per_event):,.0f} to {max(per_event):,.0f} "
            f"(goal at most {GOAL_EVENT_BYTES:,.0f}: {verdict}); per worker and round: "
            + ", ".join(
                f"K = {row['K']:,} r = {row['r']} {row['transport']}: "
                f"{row['db_bytes_per_round'] / row['K']:,.0f}"
                for row in sorted(rows, key=lambda x: (x["transport"], x["r"], x["K"]))
            )
            + "."
        )
    return lines


def fedavg_lines(result: Mapping[str, Any] | None) -> list[str]:
    """The ratio to plain Flower FedAvg with its spread over the pairs."""
    if not result:
        return ["Not measured in this run."]
    verdict = "met" if result["goal_met"] else "NOT met"
    return [
        f"K = {result['workers']:,}, r = 1, {result['pairs']} alternating pairs "
        f"({result['rounds']} rounds each, rounds 2 to {result['rounds'] - 1} timed): "
        f"**{result['ratio']:.2f}** (goal at most {result['goal']}: {verdict}); pairs from "
        f"{result['min']:.2f} to {result['max']:.2f}, quartiles {result['q1']:.2f} and "
        f"{result['q3']:.2f}; Phalanx {result['phalanx_round_s']:.3f} s and FedAvg "
        f"{result['fedavg_round_s']:.3f} s per round (medians). Per pair: "
        + ", ".join(f"{x:.2f}" for x in result["ratio_per_pair"])
        + ".",
    ]
