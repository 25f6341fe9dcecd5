"""Federated evaluation: clients' reports on the global model, checked, bounded, aggregated.

After a round of a local-data run (``data.local.evaluate_every``), every worker
that was given work evaluates the new global model on its local test split
(:mod:`phalanx.local_evaluation`) and reports ``(loss, accuracy, num_samples)``.
The coordinator aggregates the reports weighted by count, as Flower's
``FedAvg`` aggregates evaluation metrics, and stores the result beside the
server-side evaluation.

What a lying client can do, and the bound
------------------------------------------
A report is what the client says; nothing the coordinator holds can check it.
So each report is judged alone (:func:`judge_report`):

* **refused** (counts for nothing, recorded as an ``implausible_evaluation``
  event): an accuracy that is not a number in ``[0, 1]``, a loss that is NaN or
  negative, a count that is not a whole number in ``1 .. 2**53``, a field of the
  wrong type. No honest client evaluating a finite model can send one;
  refusing, rather than clipping an accuracy of 7 to 1, gives the lie no weight;
* **clipped**: a loss above :data:`MAX_LOSS` (``+inf`` included) counts as
  :data:`MAX_LOSS` (an honest client can measure a huge loss on a bad model, so
  this is no event); a count above the cap counts as the cap (as training's
  claims: the largest local test split of the run's partition when the
  coordinator made it, else :data:`~phalanx.local_rounds.MEDIAN_MULTIPLE` x the
  median claim).

With ``q`` liars among the reports, each weighing at most the cap ``C``, and
honest reports of total weight ``W`` (accuracy ``A``, loss ``L``), the aggregate
accuracy lies within ``q C / (W + q C)`` of ``A`` and the loss within
``MAX_LOSS q C / (W + q C)`` of ``L``, whatever they send; no report can make
either aggregate NaN, infinite, or the run stop. In a simulated run whose
clients' test splits are alike in size, ``C / W`` is about ``1 / (K - q)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from torch import Tensor

from phalanx.data_mode import ModelShape
from phalanx.event_kinds import FAULT_KINDS, EventKind
from phalanx.local_rounds import count_cap
from phalanx.replies import MAX_SAMPLES, Rejection
from phalanx.reports import EventReport

MAX_LOSS = 100.0
"""Largest loss a report counts for (cross-entropy of a prediction of probability e**-100)."""

Status = Literal["counted", "clipped", "refused"]


@dataclass(frozen=True)
class EvaluationTask:
    """One worker's evaluation of the global model after a round (the weights travel beside)."""

    run_id: str
    round: int
    nonce: str
    worker: int
    model_shape: ModelShape


@dataclass(frozen=True)
class EvaluationReport:
    """A worker's report, as it arrived: nothing in it is checked yet."""

    worker: int
    loss: object
    accuracy: object
    num_samples: object


@dataclass(frozen=True)
class EvaluationExchange:
    """The reports of one evaluation, and the workers that failed to give one.

    A worker asked that is in neither was silent: it sent nothing before the
    exchange closed.
    """

    reports: Sequence[EvaluationReport]
    failures: Sequence[Rejection] = ()
    bytes_down: int = 0


@runtime_checkable
class FederatedEvaluator(Protocol):
    """A transport that can also ask workers to evaluate the global model."""

    def evaluate(self, tasks: Sequence[EvaluationTask], weights: Tensor) -> EvaluationExchange:
        """Send every task with the global ``weights``; return the reports that came back."""
        ...


@dataclass(frozen=True)
class JudgedReport:
    """A report as it counts: its status, the values used (``None`` when refused), why."""

    worker: int
    status: Status
    loss: float | None
    accuracy: float | None
    num_samples: int | None
    reasons: tuple[str, ...] = ()
    capped: bool = False


def _number(value: object) -> float | None:
    """Return ``value`` as a float when it is a real number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return math.inf if value > 0 else -math.inf


def _shown(value: object) -> str:
    """Return a claimed value in a few characters, for the event's evidence."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return type(value).__name__
    return repr(value)[:40]


def judge_report(report: EvaluationReport) -> JudgedReport:
    """Refuse an impossible report; clip a loss above :data:`MAX_LOSS` (see the module)."""
    reasons = []
    accuracy = _number(report.accuracy)
    if accuracy is None or not 0.0 <= accuracy <= 1.0:  # NaN fails the comparison too
        reasons.append(f"accuracy {_shown(report.accuracy)} is not a number in [0, 1]")
    loss = _number(report.loss)
    if loss is None or math.isnan(loss) or loss < 0.0:
        reasons.append(f"loss {_shown(report.loss)} is not a number >= 0")
    count = report.num_samples
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SAMPLES:
        reasons.append(f"sample count {_shown(count)} is not a whole number in 1..2**53")
    if reasons:
        return JudgedReport(report.worker, "refused", None, None, None, tuple(reasons))
    assert accuracy is not None and loss is not None and isinstance(count, int)
    if loss > MAX_LOSS:
        return JudgedReport(report.worker, "clipped", MAX_LOSS, accuracy, count)
    return JudgedReport(report.worker, "counted", loss, accuracy, count)


def capped(judged: JudgedReport, cap: int) -> JudgedReport:
    """Return ``judged`` with its count cut to ``cap`` (and said so) when above it."""
    if judged.num_samples is None or judged.num_samples <= cap:
        return judged
    return dataclasses.replace(judged, num_samples=cap, capped=True)


@dataclass(frozen=True)
class FederatedResult:
    """A round's federated evaluation: the aggregate and every worker's judged report.

    ``silent`` lists the workers asked that sent neither a report nor a failure.
    """

    judged: tuple[JudgedReport, ...]
    failures: tuple[Rejection, ...]
    cap: int
    bytes_down: int = 0
    silent: tuple[int, ...] = ()

    @property
    def kept(self) -> tuple[JudgedReport, ...]:
        """The reports that count (counted or clipped)."""
        return tuple(j for j in self.judged if j.status != "refused")

    def metrics(self) -> dict[str, float]:
        """Return the round's metrics of it (``fed_loss``, ``fed_accuracy`` when any counted)."""
        kept = self.kept
        total = sum(j.num_samples or 0 for j in kept)
        out = {
            "fed_reports": float(len(kept)),
            "fed_refused": float(sum(j.status == "refused" for j in self.judged)),
            "fed_failed": float(len(self.failures)),
            "fed_silent": float(len(self.silent)),
            "fed_clipped_losses": float(sum(j.status == "clipped" for j in kept)),
            "fed_capped_claims": float(sum(j.capped for j in kept)),
            "fed_count_cap": float(self.cap),
            "fed_samples": float(total),
            "fed_bytes_down": float(self.bytes_down),
        }
        if total:
            out["fed_loss"] = sum((j.loss or 0.0) * (j.num_samples or 0) for j in kept) / total
            out["fed_accuracy"] = (
                sum((j.accuracy or 0.0) * (j.num_samples or 0) for j in kept) / total
            )
        return out

    def events(
        self,
        t: int,
        client_ids: Mapping[int, str],
        recorded: frozenset[tuple[int, str]] = frozenset(),
    ) -> list[EventReport]:
        """Return the events of refused reports and of failed evaluations.

        A refused report is a medium event: it changes no model. A worker that failed
        to evaluate gets the event of its failure's kind (a fault of its own code or
        data is low severity, never misbehaviour; a malformed answer medium), unless
        ``recorded`` holds that worker and kind already this round (a client whose data
        does not fit the model fails its training and its evaluation alike: one event).
        """
        refused = [
            EventReport(
                worker=j.worker,
                client_id=client_ids.get(j.worker),
                kind=EventKind.IMPLAUSIBLE_EVALUATION,
                severity="medium",
                evidence={
                    "round": t,
                    "reason": "; ".join(j.reasons),
                    "summary": f"Round {t}: worker {j.worker}'s evaluation report was refused "
                    f"and counts for nothing: {'; '.join(j.reasons)}.",
                },
            )
            for j in self.judged
            if j.status == "refused"
        ]
        failed = [
            EventReport(
                worker=r.worker,
                client_id=client_ids.get(r.worker),
                kind=r.kind,
                severity="low" if r.kind in FAULT_KINDS else "medium",
                evidence={
                    "round": t,
                    "reason": f"evaluation: {r.reason}",
                    "summary": f"Round {t}: worker {r.worker} did not evaluate the global "
                    f"model: {r.reason}.",
                },
            )
            for r in self.failures
            if (r.worker, r.kind) not in recorded
        ]
        return refused + failed


def federated_result(
    exchange: EvaluationExchange, largest_test: int | None, asked: Iterable[int] = ()
) -> FederatedResult:
    """Judge every report of ``exchange``, cap the counts, and keep the failures.

    A worker's second report in one exchange is ignored (the first one counts); a
    worker of ``asked`` that neither reported nor failed is listed as silent.
    """
    seen: set[int] = set()
    judged = []
    for report in exchange.reports:
        if report.worker in seen:
            continue
        seen.add(report.worker)
        judged.append(judge_report(report))
    kept_claims = [j.num_samples for j in judged if j.num_samples is not None]
    cap = count_cap(kept_claims, largest_test)
    return FederatedResult(
        judged=tuple(capped(j, cap) for j in judged),
        failures=tuple(exchange.failures),
        cap=cap,
        bytes_down=exchange.bytes_down,
        silent=tuple(sorted(set(asked) - seen - {f.worker for f in exchange.failures})),
    )


def report_fields(judged: JudgedReport) -> dict[str, Any]:
    """Return a judged report as a client's round row stores it."""
    return {
        "eval_status": judged.status,
        "eval_loss": judged.loss,
        "eval_accuracy": judged.accuracy,
        "eval_samples": judged.num_samples,
    }
