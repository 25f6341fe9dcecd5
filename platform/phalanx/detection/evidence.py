"""Why a worker was flagged: the data behind each flag and its plain-English summary."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from phalanx.agreeing_group import AgreeingGroup
from phalanx.detection.comparison import DEFAULT_TOL, Mode
from phalanx.detection.ties import TiePolicy
from phalanx.english_list import join_words as _join
from phalanx.english_list import name_numbers as _listing

Severity = Literal["high", "low"]
EvidenceKind = Literal["outside_max_clique", "majority_minority", "outlier", "low_degree"]

DIGEST_PREFIX_LENGTH = 32
"""Hex digits of a replica's payload digest an event stores (the first 128 bits of its SHA-256).

An r = 3 flag names nine replicas; their full digests made up a quarter of its
evidence. The round's agreement record keeps each full digest once
(:attr:`phalanx.agreement_record.AgreementRecord.digests`), and a reader finds it
there by this prefix (:meth:`~phalanx.agreement_record.AgreementRecord.full_digest`);
128 bits tell a round's few thousand digests apart as surely as 256 bits do.
"""


DISTANCE_DIGITS = 9
"""Significant digits of a relative distance an event stores: the replicas are float32,
whose values nine digits already tell apart, and whether a pair agreed is stored beside."""


@dataclass(frozen=True)
class ReplicaDistance:
    """Relative L2 distance between the replicas of workers ``a`` and ``b`` of one file."""

    a: int
    b: int
    distance: float
    agree: bool


@dataclass(frozen=True)
class FileDispute:
    """What happened to one file that a flagged worker replied for.

    Attributes
    ----------
    file : int
        File index.
    digests : dict of int to str
        Each replica's payload digest, by worker.
    distances : tuple of ReplicaDistance
        Every pair of replicas with its relative distance (empty when not computed).
    accepted_from : int or None
        Worker whose replica became the file's accepted value; ``None`` if dropped.
    """

    file: int
    digests: Mapping[int, str]
    distances: tuple[ReplicaDistance, ...]
    accepted_from: int | None

    def distance_from(self, worker: int) -> float | None:
        """Largest distance between ``worker``'s replica and one it disagreed with."""
        values = [d.distance for d in self.distances if worker in (d.a, d.b) and not d.agree]
        return max(values, default=None)

    def to_dict(self, subject: int) -> dict[str, Any]:
        """JSON-safe form of the file as it concerns ``subject``, the flagged worker.

        Each replica is its worker and the first :data:`DIGEST_PREFIX_LENGTH` hex digits
        of its digest; every replica but the subject's also carries its ``distance`` to
        the subject's replica (to :data:`DISTANCE_DIGITS` significant digits) and
        whether they ``agree``, when that pair was compared. Distances between the other
        replicas concern other workers (the round's agreement record has their
        conflicts), so they are left out. Events recorded before this form listed every
        pair under ``"distances"`` and full digests.
        """
        measured = {
            d.b if d.a == subject else d.a: d for d in self.distances if subject in (d.a, d.b)
        }
        replicas = []
        for worker, digest in sorted(self.digests.items()):
            replica: dict[str, Any] = {"worker": worker, "digest": digest[:DIGEST_PREFIX_LENGTH]}
            pair = measured.get(worker) if worker != subject else None
            if pair is not None:
                replica["distance"] = _json_float(_significant(pair.distance))
                replica["agree"] = pair.agree
            replicas.append(replica)
        return {"file": self.file, "replicas": replicas, "accepted_from": self.accepted_from}


@dataclass(frozen=True)
class Evidence:
    """Why one worker was flagged, for the record and for a person reviewing it.

    Attributes
    ----------
    worker : int
        The flagged worker.
    kind : str
        ``"outside_max_clique"`` (outside the unique maximum clique),
        ``"majority_minority"`` (maximum cliques tie, so the majority rule decides; the
        worker is in none of them),
        ``"outlier"`` (r = 1 distance score) or ``"low_degree"`` (Aspis+ window).
    severity : {"high", "low"}
        ``"high"`` rests on replicas that disagree; ``"low"`` on distance alone.
    agreeing : AgreeingGroup or None
        The agreeing workers the flag is measured against (the unique maximum clique,
        or the union of the tied maximum cliques) as a count and a digest: the round's
        agreement record lists the members once (:mod:`phalanx.agreeing_group`), so an
        event's size does not grow with the federation. ``None`` for outliers and low
        degree.
    disagreed_with : tuple of int
        Workers whose replicas disagreed with this worker's.
    files : tuple of FileDispute
        Per disputed file (or, for outliers, per outlying update): digests and distances.
    mode : str
        Comparison mode used.
    tol : float
        Relative tolerance used.
    num_max_cliques : int
        Number of maximum cliques (1 when unique; 0 when not applicable).
    score, threshold : float or None
        Outlier score and its threshold, or summed degree and its threshold.
    distance_ratio, ratio_threshold : float or None
        Outliers: the update's distance to the median update over the typical distance,
        and how many times it had to be (``None`` for other kinds).
    rounds : int or None
        Rounds the summed degree covers (``"low_degree"`` only).
    on_tie : {"drop_disputed", "majority"}
        How files were decided when maximum cliques tied (``"majority_minority"`` only).
    """

    worker: int
    kind: EvidenceKind
    severity: Severity
    agreeing: AgreeingGroup | None = None
    disagreed_with: tuple[int, ...] = ()
    files: tuple[FileDispute, ...] = ()
    mode: Mode = "auto"
    tol: float = DEFAULT_TOL
    num_max_cliques: int = 0
    score: float | None = None
    threshold: float | None = None
    rounds: int | None = None
    on_tie: TiePolicy = "drop_disputed"
    distance_ratio: float | None = None
    ratio_threshold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (lists, strings, numbers), summary included.

        Fields without a value (``None``: those of other kinds, such as an outlier's
        score on a clique flag) are left out, and each file is written as it concerns
        this worker (:meth:`FileDispute.to_dict`), so that an r = 3 flag's evidence
        stays near 1.5 kB whatever the federation's size.
        """
        stored = {
            "worker": self.worker,
            "kind": self.kind,
            "severity": self.severity,
            "agreeing": None if self.agreeing is None else self.agreeing.to_dict(),
            "disagreed_with": list(self.disagreed_with),
            "files": [f.to_dict(self.worker) for f in self.files],
            "mode": self.mode,
            "tolerance": self.tol,
            "num_max_cliques": self.num_max_cliques,
            "score": _json_float(self.score),
            "threshold": _json_float(self.threshold),
            "distance_ratio": _json_float(self.distance_ratio),
            "ratio_threshold": _json_float(self.ratio_threshold),
            "rounds": self.rounds,
            "on_tie": self.on_tie,
            "summary": self.summary(),
        }
        return {key: value for key, value in stored.items() if value is not None}

    def digests(self) -> frozenset[str]:
        """Return the full digest of each replica its files name (the round keeps them)."""
        return frozenset(d for f in self.files for d in f.digests.values())

    def summary(self) -> str:
        """One plain-English paragraph explaining the flag."""
        w = self.worker
        if self.kind == "outlier":
            files = _listing("file", "files", [d.file for d in self.files])
            return (
                f"Worker {w}'s update for {files} lies far from the other updates: its "
                f"outlier score is {_num(self.score)} robust standard deviations above the "
                f"typical update's, over the threshold {_num(self.threshold)}"
                f"{_ratio_clause(self.distance_ratio, self.ratio_threshold)}. Every file "
                "had a single replica, so no replicas could be compared; this flag rests on "
                "distance alone and is of low severity."
            )
        if self.kind == "low_degree":
            per_round = (self.threshold or 0.0) / max(self.rounds or 1, 1)
            rounds = f"{self.rounds} round{'' if self.rounds == 1 else 's'}"
            return (
                f"Worker {w} agreed with too few workers over the last {rounds}: its "
                f"degrees in the agreement graph sum to {_num(self.score)}, "
                f"below {_num(per_round)} per round, {_num(self.threshold)} in all. An honest "
                "worker agrees with every other honest worker, so its degree never falls "
                "below that bound (K - q - 1 per round when all K workers reply)."
            )
        disputes = self._disputes_sentence()
        size = 0 if self.agreeing is None else self.agreeing.count
        if self.kind == "outside_max_clique":
            return (
                f"{disputes}; the {size} workers of the round's largest group (listed with "
                f"the round) agree with one another on every shared file, so worker {w} is "
                "outside the unique largest group of mutually agreeing workers."
            )
        decided = (
            "each file's value came from the strict majority of its unflagged replicas"
            if self.on_tie == "majority"
            else "a file kept a value only where its unflagged replicas all agreed, and "
            "disputed files were left out"
        )
        return (
            f"{disputes}; {self.num_max_cliques} groups of mutually agreeing workers tie for "
            f"largest (together {size} workers, listed with the round) and worker {w} "
            "belongs to none of them. As the "
            f"largest group is not unique, {decided}."
        )

    def _disputes_sentence(self) -> str:
        distances = [d.distance_from(self.worker) for d in self.files]
        shown = _distance_range([x for x in distances if x is not None])
        if self.mode == "exact":
            how = f"digests differ; relative distance {shown}"
        else:
            how = f"relative distance {shown}, tolerance {self.tol:g}"
        return (
            f"Worker {self.worker} disagreed with "
            f"{_listing('worker', 'workers', self.disagreed_with)} on "
            f"{_listing('file', 'files', [d.file for d in self.files])} ({how})"
        )


def _distance_range(distances: Sequence[float]) -> str:
    """``"1.98 and 2.01"`` for a few distances, ``"0.5 to 2"`` or ``"1.01 on each"`` for many."""
    words = [_num(x) for x in distances]
    if len(words) <= 3:
        return _join(words) or "n/a"
    low, high = _num(min(distances)), _num(max(distances))
    return f"{low} on each" if low == high else f"{low} to {high}"


def _ratio_clause(ratio: float | None, floor: float | None) -> str:
    """``", and its distance to the median update is 40 times the typical one (over 2)"``."""
    if ratio is None:
        return ""
    over = "" if floor is None else f" (over {_num(floor)})"
    return f", and its distance to the median update is {_num(ratio)} times the typical one{over}"


def _significant(x: float) -> float:
    """``x`` to :data:`DISTANCE_DIGITS` significant digits (``1.0099999999840024`` -> 1.01)."""
    return float(f"{x:.{DISTANCE_DIGITS}g}") if math.isfinite(x) else x


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _json_float(x: float | None) -> float | None:
    """``x`` if finite, else ``None`` (JSON has no NaN or Infinity)."""
    return x if x is not None and math.isfinite(x) else None
