"""What the command line shows: round progress, a run's summary, JSON listings.

Messages for the person at the terminal go to standard error (:data:`console`);
standard output carries only results (a summary, a listing, a secret), so
``--format json`` output can be piped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from rich.progress import Progress

    from phalanx.config import RunConfig
    from phalanx.reports import RoundReport
    from phalanx.runs.summary import RunSummary

console = Console(stderr=True, soft_wrap=True)
"""Messages for the person at the terminal (standard error), never wrapped: a line that
does not fit a terminal folds there, and a log file or a pipe gets each message whole."""


class Format(StrEnum):
    """Output formats of summaries and listings."""

    TABLE = "table"
    JSON = "json"


FormatOption = Annotated[
    Format, typer.Option("--format", help="How results are printed: a table, or JSON to pipe.")
]


def say(line: str) -> None:
    """Print one plain line for the person at the terminal (no markup is interpreted)."""
    console.print(line, markup=False, highlight=False)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to standard output."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def time_left(seen: Sequence[RoundReport], rounds: int) -> float | None:
    """Seconds until the run's last round, at the mean time of its rounds so far; None if unknown.

    The first round this process saw finish is left out of the mean: it carries
    the federation's warm-up (a local Ray starting its actors, each importing
    torch), which took 40 s of a quick-digits run whose later rounds took 1 s
    each and put the ETA ten times too far. So the ETA shows from the second
    round seen on.

    Parameters
    ----------
    seen : sequence of RoundReport
        The rounds this process saw finish, in order (a resumed run starts past round 1).
    rounds : int
        The run's number of rounds.
    """
    if len(seen) < 2:
        return None
    left = rounds - seen[-1].round
    if left <= 0:
        return None
    steady = seen[1:]
    mean_s = (steady[-1].finished_at - steady[0].started_at).total_seconds() / len(steady)
    return max(mean_s, 0.0) * left


def clock(seconds: float) -> str:
    """``H:MM:SS``, as the progress bar shows elapsed time."""
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


@contextmanager
def round_progress(
    config: RunConfig, output: Format, out: Console = console
) -> Iterator[tuple[Progress, Callable[[RoundReport], None]]]:
    """Show a progress bar (round, accuracy, flagged workers, ETA) while rounds finish.

    The ETA is the rounds left times the mean round time so far, from the second
    round on (:func:`time_left`). On a console
    that is not a terminal (a log file, a pipe, CI) a bar is only drawn at the
    end, so each round is also printed as a line of its own, except with
    ``--format json``, whose console output is kept to the summary.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    live = out.is_terminal
    seen: list[RoundReport] = []
    with Progress(
        TextColumn("round"),
        MofNCompleteColumn(),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=out,
        disable=not live,
    ) as progress:
        task = progress.add_task("rounds", total=config.rounds, status="")

        def on_round(report: RoundReport) -> None:
            seen.append(report)
            flagged = ",".join(map(str, report.flagged)) or "none"
            status = f"accuracy {report.accuracy:.3f}  flagged {flagged}"
            left = time_left(seen, config.rounds)
            if left is not None:
                status += f"  ETA {clock(left)}"
            progress.update(task, completed=report.round, status=status)
            if not live and output != Format.JSON:
                out.print(
                    f"round {report.round}/{config.rounds}  {status}", highlight=False, markup=False
                )

        yield progress, on_round


def print_summary(summary: RunSummary, output: Format) -> None:
    """Print a finished run's summary: a table, or its stored JSON."""
    from rich.table import Table

    if output == Format.JSON:
        print_json(summary.to_dict())
        return
    table = Table(title=f"Run {escape(summary.run_id)}")
    table.add_column("measure")
    table.add_column("value")
    rows = {
        "rounds": str(summary.rounds),
        "final accuracy": f"{summary.final_accuracy:.4f}",
        "flagged clients": str(len(summary.flagged)),
        "adversaries (ground truth)": str(len(summary.adversaries)),
        "precision": _ratio(summary.precision),
        "recall": _ratio(summary.recall),
        "bytes up": f"{summary.bytes_up:,}",
        "bytes down": f"{summary.bytes_down:,}",
        "model digest": summary.model_digest[:16],
    }
    for key, value in rows.items():
        table.add_row(key, escape(value))
    Console().print(table)


def _ratio(value: float | None) -> str:
    """Format a precision or recall; "n/a" without ground truth (a deployed run)."""
    return "n/a" if value is None else f"{value:.2f}"
