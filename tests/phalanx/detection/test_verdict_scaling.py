"""The round's verdict costs no pass over every file per flagged worker."""

from __future__ import annotations

import pytest

from phalanx.assignment import Assignment
from phalanx.detection import detect
from phalanx.detection.comparison import FileComparison
from tests.support.replicas import attacked


def _conflict_scans_per_file(k: int, monkeypatch: pytest.MonkeyPatch) -> tuple[float, int]:
    """File f on workers f, f + 1, f + 2 (mod K); every tenth worker lies on its files."""
    files = tuple(tuple(sorted({f, (f + 1) % k, (f + 2) % k})) for f in range(k))
    assignment = Assignment(num_workers=k, files=files)
    liars = set(range(0, k, 10))
    replicas = attacked(assignment, liars)
    scans = 0
    conflicts = FileComparison.conflicts
    workers = FileComparison.workers.fget  # type: ignore[attr-defined]

    def counted_conflicts(self: FileComparison):  # type: ignore[no-untyped-def]
        nonlocal scans
        scans += 1
        return conflicts(self)

    def counted_workers(self: FileComparison) -> tuple[int, ...]:
        nonlocal scans
        scans += 1
        return workers(self)  # type: ignore[no-any-return]

    monkeypatch.setattr(FileComparison, "conflicts", counted_conflicts)
    monkeypatch.setattr(FileComparison, "workers", property(counted_workers))
    verdict = detect(assignment, replicas)
    assert verdict.flagged == liars
    assert all(len(verdict.evidence[w].files) == 3 for w in liars)
    return scans / k, len(liars)


def test_the_evidence_of_ten_times_the_flags_scans_each_file_as_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small, flags_small = _conflict_scans_per_file(60, monkeypatch)
    large, flags_large = _conflict_scans_per_file(600, monkeypatch)
    assert flags_large == 10 * flags_small
    assert large == pytest.approx(small)  # per file as often, not once per flagged worker
