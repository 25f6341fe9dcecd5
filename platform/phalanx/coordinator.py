"""The round loop: assign, dispatch, verify, detect, aggregate, step, evaluate, report.

The coordinator talks to workers through a :class:`~phalanx.exchange.Transport` and reports
through a :class:`~phalanx.reports.RoundSink`, so it knows neither Flower nor
the database (docs/architecture.md, section 4).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import torch
from torch import Tensor, nn

from phalanx.aggregation import aggregate, largest_f
from phalanx.agreement_record import AgreementRecord
from phalanx.arrivals import TimedReply, simulated_arrivals
from phalanx.assignment import Assignment
from phalanx.breakdown import fitted_options, rule_inputs
from phalanx.channel import Downlink, make_channel
from phalanx.client_rounds import client_rounds
from phalanx.collect.dropcompute import measured_round
from phalanx.collect.pieces import Collection
from phalanx.collect.registry import CollectionPolicy
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, split_size
from phalanx.data_mode import LocalTrainingConfig
from phalanx.detection import Replica, Verdict, compare_round, judge
from phalanx.detection.disputes import LiarsAcrossRounds
from phalanx.detection.exposure import exposed_files
from phalanx.event_kinds import FAULT_KINDS, EventKind
from phalanx.exchange import Exchange, LateReply, Transport
from phalanx.faults import RunFailedError, common_failure
from phalanx.federated_evaluation import (
    EvaluationTask,
    FederatedEvaluator,
    FederatedResult,
    federated_result,
)
from phalanx.finite import all_finite
from phalanx.heap import return_freed_memory
from phalanx.intake import Intake, RoundChecks
from phalanx.local_data import model_shape
from phalanx.local_evaluation import split_sizes
from phalanx.local_rounds import LocalRounds, Weights
from phalanx.nets import layer_shapes, load_flat_, model_digest
from phalanx.optim import ServerOptimizer
from phalanx.overflow import overflow_evidence, trace_overflow, update_norms
from phalanx.partitions import PartitionReport
from phalanx.plan import assigned_tasks, base_assignment, round_assignment, round_samples
from phalanx.policy_memory import PolicyMemory
from phalanx.replies import (
    Decoder,
    Rejection,
    Reply,
    Task,
)
from phalanx.reports import EventReport, RoundReport, RoundSink, rejection_event, suspects_event
from phalanx.response_times import LateResponse, round_responses
from phalanx.roster import Member
from phalanx.systems.profiles import draw_profiles
from phalanx.training import derive_seed, evaluate

log = logging.getLogger(__name__)


class Coordinator:
    """Drives a run round by round.

    Parameters
    ----------
    config : RunConfig
        The run.
    run_id : str
        Identifier written into every task and signed into every reply.
    transport : Transport
        How tasks reach workers.
    members : Mapping[int, Member]
        Worker index -> identity, for every worker of the run.
    model : nn.Module
        The model architecture; its parameters are overwritten from ``params``.
    params : Tensor
        Initial (or restored) flat global parameters.
    test_set : ImageDataset
        Held-out data evaluated after every round.
    sink : RoundSink
        Receives each finished round with its checkpoint.
    decode : Decoder, optional
        Turns a payload into an update; defaults to the run's channel (raw
        float32, or the codec when ``config.codec.enabled``).
    partition : PartitionReport, optional
        ``data.mode = "local"`` in simulation: the run's partition, whose largest
        part caps a client's claimed sample count (:mod:`phalanx.local_rounds`).
    train_size : int, optional
        Samples of the training split the tasks' sample indices point into (assigned
        data); read from the run's dataset when not given.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        run_id: str,
        transport: Transport,
        members: Mapping[int, Member],
        model: nn.Module,
        params: Tensor,
        test_set: ImageDataset,
        sink: RoundSink,
        decode: Decoder | None = None,
        partition: PartitionReport | None = None,
        train_size: int | None = None,
    ) -> None:
        self.config = config
        self.run_id = run_id
        self.transport = transport
        self.members = dict(members)
        self.model = model
        self.test_set = test_set
        self.sink = sink
        self.channel = make_channel(config.codec, layer_shapes(model), params, config.seed)
        self.decode = decode or self.channel.decoder
        t = config.training
        self.optimizer = ServerOptimizer(
            params, kind=t.optimizer, lr=t.server_lr, momentum=t.momentum
        )
        self._base = base_assignment(config)
        # Worker -> last round it gets no work (detection.exclude_flagged_for).
        self._benched: dict[int, int] = {}
        # Rounds in a row, up to the last one, that applied no update.
        self._idle_rounds = 0
        bound = config.detection.max_adversaries
        systems = config.systems
        self._profiles = (
            draw_profiles(systems, config.assignment.num_workers, config.seed)
            if systems.enabled
            else ()
        )
        self._policy = CollectionPolicy.from_config(config.collect)
        # What adaptive_k and the bandit learn from round to round.
        self._memory = PolicyMemory.start(
            config.collect,
            config.assignment.num_workers,
            num_groups=self._base.num_files,
            dim=params.numel(),
            # Deployed workers time their own files: their claims choose the budget.
            claimed=config.deployment.backend == "deployment",
        )
        # Simulated seconds of the rounds so far (the systems model's clock).
        self._simulated_s = 0.0
        self._across = LiarsAcrossRounds(
            (config.assignment.num_workers - 1) // 2 if bound is None else bound
        )
        missing = set(range(config.assignment.num_workers)) - set(self.members)
        if missing:
            raise ValueError(f"no identity for workers {sorted(missing)}")
        self._client_ids = {w: m.client_id for w, m in self.members.items()}
        self._local: LocalRounds | None = None
        self._largest_test: int | None = None
        self._evaluator: FederatedEvaluator | None = None
        if config.data.mode == "local":
            settings = config.data.local or LocalTrainingConfig()
            fraction = settings.test_fraction if settings.evaluates else None
            self._local = LocalRounds.of(model_shape(test_set), partition, fraction)
            tested = [split_sizes(n, fraction)[1] for n in partition.samples] if partition else []
            self._largest_test = max(tested, default=None)
            if settings.evaluates:
                if isinstance(transport, FederatedEvaluator):
                    self._evaluator = transport
                else:
                    log.warning(
                        "%s cannot ask workers to evaluate: no federated evaluation in this run",
                        type(transport).__name__,
                    )
        if train_size is None and self._local is None:
            train_size = split_size(config.data.dataset, "train")
        self._train_size = train_size or 0

    @property
    def params(self) -> Tensor:
        """The current global parameters."""
        return self.optimizer.params

    def restore(self, checkpoint: bytes) -> None:
        """Continue from a checkpoint written by an earlier run of the same config."""
        self._restore_state(torch.load(io.BytesIO(checkpoint), weights_only=True))

    def checkpoint(self) -> bytes:
        """Serialise everything the next round depends on."""
        buffer = io.BytesIO()
        torch.save(self._checkpoint_state(), buffer)
        return buffer.getvalue()

    def _restore_state(self, state: dict[str, Any]) -> None:
        """Take up the state :meth:`_checkpoint_state` saved."""
        self.optimizer.load_state_dict(state["optimizer"])
        self._benched = {int(w): int(t) for w, t in state.get("benched", {}).items()}
        self._idle_rounds = int(state.get("idle_rounds", 0))
        self._simulated_s = float(state.get("simulated_s", 0.0))
        self._memory.restore(state.get("collect", {}))
        self._across.restore(
            state.get("across_rounds", {}), num_workers=self.config.assignment.num_workers
        )
        channel = {k: v.numpy() for k, v in state["channel"].items()}
        self.channel.restore(channel, self.params)

    def _checkpoint_state(self) -> dict[str, Any]:
        """Return everything the next round depends on, as ``torch.save`` can store it."""
        channel = {k: torch.from_numpy(v) for k, v in self.channel.state().items()}
        return {
            "optimizer": self.optimizer.state_dict(),
            "channel": channel,
            "benched": dict(self._benched),
            "idle_rounds": self._idle_rounds,
            "across_rounds": self._across.state(),
            "simulated_s": self._simulated_s,
            "collect": self._memory.state(),
        }

    def run(
        self,
        *,
        start_round: int = 1,
        on_round: Callable[[RoundReport], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[RoundReport]:
        """Run rounds ``start_round .. config.rounds``; stop early if ``should_stop()``.

        Raises
        ------
        RunFailedError
            When the run cannot go on: most workers of a round failed, the aggregate
            overflowed beyond what half of the updates explains, or too many rounds
            in a row applied no update (:meth:`check_progress`). Every round before
            the failing one is recorded.
        """
        reports = []
        for t in range(start_round, self.config.rounds + 1):
            if should_stop is not None and should_stop():
                break
            report = self.run_round(t)
            reports.append(report)
            if on_round is not None:
                on_round(report)
            self.check_progress(t)
        return reports

    def run_round(self, t: int) -> RoundReport:
        """Run round ``t`` end to end and hand it to the sink."""
        started = datetime.now(UTC)
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[name] = now - clock
            clock = now

        assignment = round_assignment(self.config, t, self._base)
        nonce = secrets.token_hex(16)
        self._benched = {w: until for w, until in self._benched.items() if until >= t}
        benched = frozenset(self._benched)
        candidates = [
            w for w in range(assignment.num_workers) if assignment.files_of(w) and w not in benched
        ]
        workers = sorted(self._memory.dispatch(candidates, assignment))
        if self._local is not None:
            tasks = {
                w: self._local.task(Task(self.run_id, t, nonce, w, assignment.files_of(w)))
                for w in workers
            }
        else:
            # The round's plan, drawn once: every task carries its own files' samples.
            samples = round_samples(self.config, self._train_size, t, assignment.num_files)
            tasks = assigned_tasks(self.run_id, t, nonce, assignment, samples, workers)
        budget = self._deployed_budget()
        if budget is not None:
            tasks = {w: dataclasses.replace(task, budget_s=budget) for w, task in tasks.items()}
        lap("assign")

        checks = RoundChecks(tasks, self.members, self.decode, t, partial=budget is not None)
        intake = None
        if self._collects:
            intake = Intake(
                self._policy,
                assignment,
                frozenset(tasks),
                checks,
                options=self._memory.round_options(),
            )
        # A deployed round closes by the policy as replies come in; a simulated one
        # receives every reply at once and closes by the systems model's clock.
        simulated = self.config.systems.enabled
        replies, bytes_down, malformed, late = self._exchange(tasks, None if simulated else intake)
        bytes_up = sum(r.num_bytes for r in replies)
        senders = {r.worker for r in replies}
        collection = None
        collection_metrics: dict[str, float] = {}
        if intake is None:
            checks.admit_all(replies)
            replicas = checks.replicas
        else:
            timed = self._simulated_arrivals(t, tasks, replies, bytes_down) if simulated else []
            intake.feed(timed)
            collection = intake.collection()
            replicas = intake.kept_replicas(collection)
            collection_metrics = self._collection_metrics(collection, intake, len(tasks))
            if simulated:
                collection_metrics["files_cut"] = self._measure_compute(timed, tasks)
            else:
                # Replies to earlier rounds that came after they closed (this round's
                # own, heard while it sent the model again, are its late responses).
                earlier = [r for r in late if r.round < t]
                collection_metrics["late_from_earlier_rounds"] = float(len(earlier))
                if self.config.collect.drop_compute:
                    self._measure_deployed_compute(intake)
                    collection_metrics["files_cut"] = float(intake.files_cut)
        # The replicas hold the decoded updates: the payloads (the round's largest data,
        # r x K updates at once) go before detection and aggregation copy the updates.
        replies.clear()
        checks.forget_payloads()
        return_freed_memory()
        events, rejected = checks.events, checks.rejected
        lap("exchange")

        for bad in malformed:
            rejected.add(bad.worker)
            events.append(rejection_event(bad, self.members[bad.worker].client_id, t))
        # One cause per worker: with one message per file a worker may fail on several.
        by_worker = {e.worker: str(e.evidence["reason"]) for e in events if e.kind in FAULT_KINDS}
        faults = list(by_worker.values())
        if faults:
            causes = "; ".join(f"{n} x {cause}" for cause, n in Counter(faults).most_common())
            log.warning("round %d: %d of %d workers failed: %s", t, len(faults), len(tasks), causes)
        failed = common_failure(faults, len(tasks))
        if failed is not None:
            raise RunFailedError(f"round {t}: {failed}")
        lap("verify")

        detection = self.config.detection
        compared = compare_round(assignment, replicas, mode=detection.mode, tol=detection.tolerance)
        # The round's own disputes join the run's record before anything is decided, so a
        # worker they prove a liar is flagged now; a worker merely outside the largest
        # agreeing group is no more than a suspect (see `judge`).
        proofs = self._across.observe(t, compared.conflicts()) if detection.across_rounds else {}
        verdict = judge(
            compared,
            # "auto" sizes f from the replicas; the r = 1 outlier score, which has none,
            # then tolerates 0.
            f=0 if self.config.aggregation.f == "auto" else self.config.aggregation.f,
            on_tie=detection.on_tie,
            outlier_threshold=detection.outlier_threshold,
            outlier_ratio=detection.ratio_for(self.config.data.mode),
            distrusted=frozenset(self._across.proven),
            outsiders="suspect" if detection.across_rounds else "flag",
        )
        flags: dict[int, tuple[str, str, dict[str, Any]]] = {
            w: (EventKind.DISPUTES_ACROSS_ROUNDS, "high", proof.to_dict())
            for w, proof in proofs.items()
        }
        for w, e in verdict.evidence.items():
            flags.setdefault(w, (e.kind, e.severity, e.to_dict()))
        if verdict.suspects:
            events.append(suspects_event(verdict, t))
        lap("detect")

        before = self.params.clone() if self._memory.follows_updates else None
        # Lazy G-CADA: the groups not waited for stand in with their last accepted update,
        # unless every worker that vouched for it is flagged (now or since).
        self._memory.forget(flags)
        aggregated = self._memory.fill(verdict.accepted)
        step = self._step(t, verdict, replicas, aggregated, checks.samples)
        if self._memory.lazy is not None:  # those the step used (dropped first on overflow)
            collection_metrics["stale_groups"] = float(step.stale)
        overflowed: dict[int, tuple[str, str, dict[str, Any]]] = {
            w: (EventKind.OVERFLOW, "high", e) for w, e in step.overflowed.items()
        }
        for flags_of_step in (flags, overflowed):
            for worker, (kind, severity, evidence) in sorted(flags_of_step.items()):
                client_id = self.members[worker].client_id
                events.append(EventReport(worker, client_id, kind, severity, evidence))
        flagged = set(flags) | set(overflowed)
        pause = self.config.detection.exclude_flagged_for
        if pause:
            for worker in flagged:
                self._benched[worker] = t + pause
        self._idle_rounds = 0 if step.applied else self._idle_rounds + 1
        self.optimizer.set_params(self.channel.commit(self.optimizer.params, t))
        if collection is not None:
            moved = self.params - before if before is not None and step.applied else None
            self._memory.observe(
                collection, frozenset(tasks), moved, verdict.accepted, verdict.supporters
            )
        # After learning: an update that overflowed was accepted, and must not stand in.
        self._memory.forget(step.overflowed)
        lap("aggregate")

        loss, accuracy, evaluated = self._evaluate(t)
        federated = self._federated_evaluation(t, nonce, tasks)
        fed_metrics: dict[str, float] = {}
        if federated is not None:
            recorded = frozenset((e.worker, e.kind) for e in events if e.worker is not None)
            events.extend(federated.events(t, self._client_ids, recorded))
            fed_metrics = federated.metrics()
        lap("evaluate")

        report = RoundReport(
            round=t,
            started_at=started,
            finished_at=datetime.now(UTC),
            loss=loss,
            accuracy=accuracy,
            flagged=tuple(sorted(flagged)),
            rejected=tuple(sorted(rejected)),
            dropped_files=tuple(sorted({*verdict.dropped, *step.left_out})),
            events=tuple(events),
            bytes_up=bytes_up,
            bytes_down=bytes_down,
            timings=timings,
            assignment=_assignment_summary(assignment),
            model_digest=model_digest(self.params),
            metrics={
                **step.metrics(),
                "eval_samples": float(evaluated),
                "benched_workers": float(len(benched)),
                **collection_metrics,
                **(step.weights.metrics() if step.weights is not None else {}),
                **fed_metrics,
            },
            agreement=AgreementRecord.from_verdict(verdict, left_out=step.left_out),
            # A deployed round stops listening at its close: who was still computing is
            # missing here, until its reply comes in a later round (late_responses).
            responses=round_responses(
                collection, tasks, clients=self._client_ids, answered=intake.arrived_at
            )
            if collection is not None and intake is not None
            else (),
            # This round's own too: a reply to its first sending can come while it
            # sends the model again to workers that lost it, after its close.
            late_responses=tuple(
                LateResponse(r.round, r.worker, r.seconds) for r in late if 0 < r.round <= t
            ),
            # By the roster, never by what a reply claims: the worker's own client.
            seen_clients=tuple(
                sorted({self._client_ids[w] for w in senders if w in self._client_ids})
            ),
            clients=client_rounds(
                tasks,
                self._client_ids,
                replicas=replicas,
                aggregate=step.aggregate if step.applied else None,
                samples=checks.samples,
                evaluation=federated,
            )
            if self._local is not None
            else (),
        )
        self.sink.round_finished(report, self.checkpoint())
        timings["persist"] = time.perf_counter() - clock
        return report

    @property
    def _collects(self) -> bool:
        """Whether rounds close by a collection policy and time their replies.

        Simulated rounds with the systems model, and every deployed round: even when
        it waits for every reply (``all``), its arrival times are the workers' response
        times.
        """
        config = self.config
        return (
            config.systems.enabled
            or config.deployment.backend == "deployment"
            or config.collect.policy != "all"
        )

    @property
    def _per_file_messages(self) -> bool:
        """Whether a deployed worker's task goes out as one message per file."""
        deployed = self.config.deployment.backend == "deployment"
        return deployed and self.config.collect.per_file

    def _deployed_budget(self) -> float | None:
        """Return the compute budget deployed tasks carry this round (DropCompute), if any.

        ``None`` in simulation (the systems model applies the budget there), without
        ``drop_compute``, and while the automatic budget still measures its warm-up.
        """
        if self.config.deployment.backend != "deployment" or not self.config.collect.drop_compute:
            return None
        budget = self._memory.budget_s
        return None if budget is None else float(budget)

    def _measure_deployed_compute(self, intake: Intake) -> None:
        """Give DropCompute the compute times a deployed round's accepted replies claim.

        Claims, bounded by what the coordinator saw: a worker's compute cannot have
        taken longer than its response (:func:`~phalanx.collect.dropcompute.measured_round`).
        """
        tasks = intake.checks.tasks
        claims = {
            w: [by_file[f] for f in tasks[w].files if f in by_file]
            for w, by_file in intake.checks.compute_s.items()
            if w in tasks
        }
        responded: dict[int, float] = {}
        for piece in intake.pieces:
            responded[piece.worker] = max(responded.get(piece.worker, 0.0), piece.time)
        measured, overhead = measured_round(claims, responded)
        self._memory.measure(measured, overhead)

    def _simulated_arrivals(
        self, t: int, tasks: Mapping[int, Task], replies: Sequence[Reply], bytes_down: int
    ) -> list[TimedReply]:
        """Time a simulated round's replies by the systems model.

        A reply from a worker given no task arrives at once, so that the checks refuse
        it on the record whenever the round closes.
        """
        collect = self.config.collect
        timed = simulated_arrivals(
            replies,
            profiles=self._profiles,
            systems=self.config.systems,
            seed=self.config.seed,
            round_=t,
            bytes_down=bytes_down // max(1, len(tasks)),
            samples_per_file=self.config.data.samples_per_file,
            per_file=collect.per_file,
            budget_s=self._memory.budget_s if collect.drop_compute else None,
        )
        return [
            x
            if x.reply.worker in tasks
            else dataclasses.replace(x, seconds=0.0, files_at=dict.fromkeys(x.reply.files, 0.0))
            for x in timed
        ]

    def _measure_compute(self, timed: Sequence[TimedReply], tasks: Mapping[int, Task]) -> float:
        """Give DropCompute the round's compute times; return how many files budgets cut."""
        mine = [x for x in timed if x.reply.worker in tasks]
        measured = [x for x in mine if x.compute_s]
        overhead = sum(x.overhead_s for x in measured) / max(1, len(measured))
        self._memory.measure([x.compute_s for x in measured], overhead)
        return float(sum(len(x.reply.files) - len(x.files_at) for x in mine))

    def _collection_metrics(
        self, collection: Collection, intake: Intake, dispatched: int
    ) -> dict[str, float]:
        """Return when the round closed, who it gave work to and what it did not wait for.

        Late: a worker whose reply came after the close, counted and never judged
        (slow is not lying). Missing: a worker given work whose reply never came.
        """
        kept = set(collection.kept_workers)
        late = {p.worker for p in collection.late} - kept
        missing = set(intake.dispatched) - set(intake.arrived_at) - intake.cut
        if self.config.systems.enabled:
            self._simulated_s += collection.closed_at
            clock = {"simulated_s": collection.closed_at, "simulated_total_s": self._simulated_s}
        else:
            clock = {"collected_s": collection.closed_at}
        return {
            **clock,
            "late_replies": float(len(late)),
            "missing_replies": float(len(missing)),
            "dispatched_workers": float(dispatched),
            **self._memory.metrics(),
        }

    def check_progress(self, t: int) -> None:
        """Fail the run once too many rounds in a row, up to round ``t``, left the model as it was.

        The limit is ``training.max_rounds_without_update``, or every round of a
        shorter run: a run that never applied an update learned nothing.

        Raises
        ------
        RunFailedError
            Naming the rounds.
        """
        limit = min(self.config.training.max_rounds_without_update, self.config.rounds)
        if self._idle_rounds >= limit:
            first = t - self._idle_rounds + 1
            span = f"round {t}" if first == t else f"rounds {first} to {t}"
            raise RunFailedError(
                f"no update was applied in {span}: every file was refused, dropped or left "
                "out; see the rounds' detection events"
            )

    def _step(
        self,
        t: int,
        verdict: Verdict,
        replicas: Sequence[Replica],
        aggregated: Mapping[int, Tensor],
        samples: Mapping[int, int],
    ) -> _Step:
        """Aggregate the accepted files and apply the result, unless it would overflow.

        ``aggregated`` is the verdict's accepted files, and lazy groups' stale ones.
        With local data and the ``mean`` rule, each update weighs by its sender's
        (capped) sample count, ``samples`` by worker (:mod:`phalanx.local_rounds`).
        When the aggregate, or the optimiser state it leads to, is not finite, the
        accepted updates of largest norm that cause it are left out (at most half of
        them; see :func:`~phalanx.overflow.trace_overflow`), and every worker that sent
        one of them is named. A stale update is never left out as a cause: when leaving
        out accepted ones does not do, the stale are dropped and the accepted traced alone.

        Raises
        ------
        RunFailedError
            When leaving out half of the updates is not enough: training diverged, or
            most accepted updates are crafted.
        """
        files = sorted(aggregated)
        stale_files = set(aggregated) - set(verdict.accepted)
        stale = len(stale_files)
        if not files:
            return _Step(files=0, f_used=None, applied=False)
        stacked = torch.stack([aggregated[f] for f in files])
        weights = self._weights(files, replicas, samples)
        counts = None if weights is None else weights.counts
        wanted = self._f_wanted(verdict)
        f_used = self._f_for(len(files), wanted)
        if f_used is None:
            return _Step(files=len(files), f_used=None, applied=False, f_wanted=wanted, stale=stale)
        update = self._aggregate(stacked, f_used, t, counts)
        if all_finite(update) and self.optimizer.step_if_finite(update):
            return _Step(
                files=len(files),
                f_used=f_used,
                applied=True,
                f_wanted=wanted,
                stale=stale,
                weights=weights,
                aggregate=update,
            )

        def fits(kept: Tensor) -> bool:
            f = self._f_for(len(kept), wanted)
            if f is None:
                return False
            candidate = self._aggregate(
                stacked[kept], f, t, None if counts is None else counts[kept]
            )
            return all_finite(candidate) and self.optimizer.stays_finite(candidate)

        norms = update_norms(stacked)
        most = len(files) // 2  # at least half of the updates must stay
        if stale_files:
            # Only this round's accepted updates may be named a cause: the stale ones
            # rank below every fresh one and are never left out for it. If leaving out
            # fresh ones is not enough, the stale ones go, and the fresh are traced alone.
            ranked = torch.where(
                torch.tensor([f in stale_files for f in files]), torch.full_like(norms, -1.0), norms
            )
            fresh_most = min(most, len(files) - stale)
            removed = trace_overflow(ranked, fits, max_removed=fresh_most) if fresh_most else None
            if removed is None:
                return self._step(t, verdict, replicas, verdict.accepted, samples)
        else:
            removed = trace_overflow(norms, fits, max_removed=most)
        if removed is None:
            without = f" even without the {most} largest" if most else ""
            raise RunFailedError(
                f"round {t}: the aggregate of the {len(files)} accepted updates overflows "
                f"float32 (or the server optimiser's state){without} (update norms "
                f"{float(norms.min()):.3g} to {float(norms.max()):.3g}): training diverged; "
                "lower training.server_lr or training.local_lr"
            )
        kept = [i for i in range(len(files)) if i not in set(removed)]
        f_kept = self._f_for(len(kept), wanted)
        assert f_kept is not None  # fits() held for this set
        rows = torch.tensor(kept, dtype=torch.int64)
        kept_update = self._aggregate(
            stacked[rows], f_kept, t, None if counts is None else counts[rows]
        )
        applied = self.optimizer.step_if_finite(kept_update)
        median = float(norms[kept].median())
        overflowed = overflow_evidence(
            t,
            [files[i] for i in removed],
            {files[i]: float(norms[i]) for i in removed},
            median,
            verdict,
            replicas,
            mode=self.config.detection.mode,
            tol=self.config.detection.tolerance,
            rule=self.config.aggregation.rule,
        )
        return _Step(
            files=len(kept),
            f_used=f_kept,
            applied=applied,
            f_wanted=wanted,
            overflowed=overflowed,
            left_out=tuple(files[i] for i in removed),
            stale=stale,
            weights=weights,
            aggregate=kept_update,
        )

    def _weights(
        self, files: Sequence[int], replicas: Sequence[Replica], samples: Mapping[int, int]
    ) -> Weights | None:
        """Return the accepted updates' sample weights, when the run's rule takes them."""
        if self._local is None or not LocalRounds.weighs(self.config.aggregation):
            return None
        return self._local.weights(files, replicas, samples)

    def _f_wanted(self, verdict: Verdict) -> int:
        """Return the ``f`` the round asks of the rule: configured, or sized to the round.

        With ``aggregation.f = "auto"``: the accepted files that the liars not yet proven
        could have supplied between them, at most ``detection.max_adversaries`` liars in
        all (`exposed_files`); 0 for the mean, which tolerates none.
        """
        f = self.config.aggregation.f
        if f != "auto":
            return f
        if self.config.aggregation.rule == "mean":
            return 0  # the mean tolerates no Byzantine input: there is nothing to size
        unproven = max(0, self._across.bound - len(self._across.proven))
        return exposed_files(verdict.supporters, unproven)

    def _f_for(self, n: int, wanted: int) -> int | None:
        """Return the ``f`` the rule tolerates with ``n`` updates, capped at ``wanted``.

        The rule receives the pre-aggregator's rows (bucketing: fewer than ``n``), with
        its options' counts (``m``, ``groups``) lowered to them when there are fewer.
        """
        agg = self.config.aggregation
        rows = rule_inputs(n, agg.pre, agg.pre_options)
        f = largest_f(agg.rule, rows, fitted_options(agg.rule, rows, agg.options))
        return None if f is None else min(wanted, f)

    def _aggregate(self, stacked: Tensor, f: int, t: int, counts: Tensor | None = None) -> Tensor:
        if counts is not None:  # local data's mean: FedAvg's weighting (f is 0 for the mean)
            return LocalRounds.aggregate(stacked, counts)
        agg = self.config.aggregation
        pre_options = dict(agg.pre_options)
        if agg.pre == "bucketing":
            pre_options.setdefault("seed", derive_seed(self.config.seed, t, -2))
        rows = rule_inputs(stacked.shape[0], agg.pre, agg.pre_options)
        return aggregate(
            agg.rule,
            stacked,
            f=f,
            pre=agg.pre,
            pre_options=pre_options if agg.pre else None,
            **fitted_options(agg.rule, rows, agg.options),
        )

    def _exchange(
        self, tasks: Mapping[int, Task], intake: Intake | None = None
    ) -> tuple[list[Reply], int, list[Rejection], list[LateReply]]:
        """Exchange the round's tasks; workers that lost track get the full state once.

        With an ``intake`` the transport hands it each reply as it arrives and stops
        waiting once it closes the round; the resync of lost workers goes on the same
        clock. It goes out even when the round is closed already (what they answer then
        comes after the close): a worker that lost the model would otherwise ask for it
        every round, never be sent it under a policy that closes before its slowest
        worker, and be missing for good. Last come the replies to earlier rounds that
        came during this one, after their rounds had closed.
        """
        started = time.monotonic()
        first = self._send(
            self._messages(tasks.values()), self.channel.downlink(), intake, 0.0, started
        )
        replies = [r for r in first.replies if not r.need_sync]
        bytes_down, malformed = first.bytes_down, list(first.malformed)
        late = list(first.late)
        lost = self._lost(tasks, first.replies)
        if lost:
            elapsed = time.monotonic() - started
            second = self._send(lost, self.channel.sync(), intake, elapsed, started)
            for reply in second.replies:
                if reply.need_sync:
                    malformed.append(
                        Rejection(reply.worker, "malformed_reply", "asked for a sync twice")
                    )
                else:
                    replies.append(reply)
            bytes_down += second.bytes_down
            malformed.extend(second.malformed)
            late.extend(second.late)
        return replies, bytes_down, malformed, late

    def _messages(self, tasks: Iterable[Task]) -> list[Task]:
        """Return the tasks as they go out: whole, or one per file (``per_file`` deployed)."""
        if not self._per_file_messages:
            return list(tasks)
        return [task.narrowed((f,)) for task in tasks for f in task.files]

    def _lost(self, tasks: Mapping[int, Task], replies: Sequence[Reply]) -> list[Task]:
        """Return what to send again with the full state: the messages that asked for it.

        With one message per file, the files a worker's request names (those of the
        message it answered), each once and only files of its task.
        """
        asking = [r for r in replies if r.need_sync and r.worker in tasks]
        if not self._per_file_messages:
            return list({r.worker: tasks[r.worker] for r in asking}.values())
        again: dict[tuple[int, int], Task] = {}
        for reply in asking:
            task = tasks[reply.worker]
            for f in reply.asked if reply.asked is not None else task.files:
                if f in task.files:
                    again.setdefault((reply.worker, f), task.narrowed((f,)))
        return list(again.values())

    def _send(
        self,
        tasks: Sequence[Task],
        downlink: Downlink,
        intake: Intake | None,
        offset: float,
        started: float,
    ) -> Exchange:
        """One exchange through the transport; an intake hears of replies on the round's clock.

        ``started``: when the round's exchange began (``time.monotonic``), before any push.
        """
        if intake is None:
            return self.transport.exchange(tasks, downlink)
        return self.transport.exchange(tasks, downlink, _Offset(intake, offset, started))

    def _federated_evaluation(
        self, t: int, nonce: str, tasks: Mapping[int, Task]
    ) -> FederatedResult | None:
        """Ask every worker given work in round ``t`` to evaluate the new global model.

        Only in local-data runs with ``data.local.evaluate_every`` due after ``t`` and a
        transport that can; reports are judged, bounded and aggregated
        (:mod:`phalanx.federated_evaluation`). Nothing a worker reports stops the run.
        """
        settings = self.config.data.local or LocalTrainingConfig()
        if self._evaluator is None or self._local is None:
            return None
        if not settings.evaluates_after(t, self.config.rounds) or not tasks:
            return None
        eval_tasks = [
            EvaluationTask(self.run_id, t, nonce, w, self._local.shape) for w in sorted(tasks)
        ]
        exchange = self._evaluator.evaluate(eval_tasks, self.params.detach().clone())
        asked = {task.worker for task in eval_tasks}
        exchange = dataclasses.replace(
            exchange,
            reports=[r for r in exchange.reports if r.worker in asked],
            failures=[f for f in exchange.failures if f.worker in asked],
        )
        return federated_result(exchange, self._largest_test, asked)

    def _evaluate(self, t: int) -> tuple[float, float, int]:
        """Evaluate the model after round ``t``: loss, accuracy and the samples evaluated."""
        load_flat_(self.model, self.params)
        eval_set = self._eval_set(final=t == self.config.rounds)
        loss, accuracy = evaluate(self.model, eval_set)
        return loss, accuracy, len(eval_set.y)

    def _eval_set(self, *, final: bool) -> ImageDataset:
        n = self.config.data.eval_samples
        if final or n is None or n >= len(self.test_set.y):
            return self.test_set
        return ImageDataset(
            x=self.test_set.x[:n],
            y=self.test_set.y[:n],
            num_classes=self.test_set.num_classes,
            name=self.test_set.name,
        )


@dataclass(frozen=True)
class _Offset:
    """An intake heard through a transport whose clock started ``offset`` seconds late.

    A transport's clock starts once its messages are pushed, and a worker may begin on
    one while the rest are pushed: how long a reply can have been computed is measured
    from ``started``, before the round's first push (``time.monotonic``).
    """

    intake: Intake
    offset: float
    started: float

    def arrived(self, reply: Reply, seconds: float) -> None:
        since_sent = time.monotonic() - self.started
        self.intake.arrived(reply, self.offset + seconds, since_sent=since_sent)

    def failed(self, worker: int, seconds: float, files: Sequence[int] | None = None) -> None:
        self.intake.failed(worker, self.offset + seconds, files)

    def closed(self, seconds: float) -> bool:
        return self.intake.closed(self.offset + seconds)


@dataclass(frozen=True)
class _Step:
    """What aggregation did in a round."""

    files: int
    f_used: int | None
    applied: bool
    f_wanted: int | None = None
    overflowed: Mapping[int, dict[str, Any]] = field(default_factory=dict)
    left_out: tuple[int, ...] = ()
    stale: int = 0
    """Of ``files``, lazy groups' stale updates (not accepted this round)."""
    weights: Weights | None = None
    aggregate: Tensor | None = None
    """The update the step applied (when ``applied``)."""

    def metrics(self) -> dict[str, float]:
        """Return what a round reports of its step."""
        return {
            # This round's accepted files: lazy groups' stale updates are not.
            "accepted_files": float(self.files - self.stale),
            # -1: too few accepted files for the rule; the model did not move.
            "f_used": float(-1 if self.f_used is None else self.f_used),
            # What the round asked of the rule (-1: no accepted file); f_used is less
            # when the rule cannot tolerate that many of the accepted files.
            "f_wanted": float(-1 if self.f_wanted is None else self.f_wanted),
            "update_applied": float(self.applied),
        }


def _assignment_summary(assignment: Assignment) -> dict[str, object]:
    loads = [len(assignment.files_of(w)) for w in range(assignment.num_workers)]
    return {
        "scheme": assignment.scheme,
        "num_workers": assignment.num_workers,
        "r": assignment.replication,
        "num_files": assignment.num_files,
        "files_per_worker": [min(loads, default=0), max(loads, default=0)],
    }
