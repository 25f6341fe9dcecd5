"""Round reports for tests that only read a few of their fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from phalanx.reports import RoundReport


def round_report(
    round: int,
    *,
    accuracy: float = 0.0,
    flagged: tuple[int, ...] = (),
    dropped: tuple[int, ...] = (),
    started_at: datetime | None = None,
    duration_s: float = 0.0,
) -> RoundReport:
    """A finished round with the given fields and zeros or empties elsewhere."""
    start = started_at or datetime.now(UTC)
    return RoundReport(
        round=round,
        started_at=start,
        finished_at=start + timedelta(seconds=duration_s),
        loss=0.0,
        accuracy=accuracy,
        flagged=flagged,
        rejected=(),
        dropped_files=dropped,
        events=(),
        bytes_up=0,
        bytes_down=0,
        timings={},
        assignment={},
        model_digest="",
    )
