"""An honest worker: compute each assigned file's update, encode, sign, reply.

With local data (a task that names the run's model shape) the worker trains on its
own data instead (:func:`phalanx.local_training.train_locally`, with ``data.local``)
and signs its sample count into the reply; data that does not fit the run's model
raises :class:`~phalanx.local_training.ModelDataMismatchError`, which the worker's
runtime reports as a ``data_mismatch`` fault. With federated evaluation on, it
holds out a seeded share of its data as its local test split, trains on the rest
and evaluates the global model on it when asked (:meth:`Worker.evaluate`).
A simulated adversary's behaviour gets what the worker trains on (on local data,
its own data less its test split) and the worker claims that count for it too.

The worker computes its files one after the other, in its task's order, and times
each (the reply's ``compute_s``, a claim the coordinator bounds). A task with a
compute budget (DropCompute, ``Task.budget_s``) is cut at a file boundary: the
worker sends the files it finished within the budget, a prefix of the task's
files that the reply's signed file list names, and stops at the first file that
finishes past it. With one message per file the budget spans the round's
messages: :meth:`Worker.answer` takes the compute already spent on the round's
earlier messages and says how much has been spent after this one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from cryptography.hazmat.primitives.asymmetric import ec
from torch import Tensor

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.data_mode import ModelShape
from phalanx.detection import payload_digest
from phalanx.federated_evaluation import EvaluationTask
from phalanx.finite import all_finite
from phalanx.identity import sign_reply
from phalanx.local_evaluation import LocalEvaluation, LocalSplit, client_split, evaluate_locally
from phalanx.nets import build_model, layer_shapes
from phalanx.replies import Reply, Task
from phalanx_clients.behaviour import Behaviour
from phalanx_clients.file_updates import file_updates
from phalanx_clients.local_updates import compute_local_update
from phalanx_clients.replica import ModelReplica, OutOfSyncError


class NonFiniteUpdateError(ArithmeticError):
    """An honest computation gave a NaN or infinite update."""


@dataclass(frozen=True)
class Answer:
    """A worker's reply to one task, and its compute spent on the round so far."""

    reply: Reply
    spent_s: float
    """Seconds of compute on the round's files so far, this task's included (also a file
    computed past the budget and dropped)."""


@dataclass(frozen=True)
class _Timed:
    """One file's update and when its computation began (``time.perf_counter``)."""

    value: Tensor
    started: float


@dataclass(frozen=True)
class Computed:
    """The files a worker computed within its budget, in its task's order."""

    updates: dict[int, Tensor]
    compute_s: tuple[float, ...]
    """Seconds each of ``updates`` took to compute, aligned with it."""
    spent_s: float


@dataclass
class Worker:
    """One worker of a run, with its data, key and copy of the global model.

    Parameters
    ----------
    config : RunConfig
        The run, as the coordinator sent it.
    train_set : ImageDataset
        The training data the worker's files index into; with local data, the
        worker's own data.
    client_id : str
        The worker's registered client id.
    private_key : ec.EllipticCurvePrivateKey
        Signs every reply.
    behaviour : Behaviour or None
        ``None`` for an honest worker; a red-team behaviour otherwise.
    node_id : int or None
        The Flower node id, bound into the signature when known.
    model_shape : ModelShape or None
        With local data: the run's model (channels, image side, classes), which
        the worker's copy of the model is built for; ``None``: its own data's.
    slow_compute_s : float
        A slow device on purpose (``phalanx-slow-compute-s``): each file takes this
        many seconds longer to compute, counted as compute. 0 for a real worker.
    """

    config: RunConfig
    train_set: ImageDataset
    client_id: str
    private_key: ec.EllipticCurvePrivateKey
    behaviour: Behaviour | None = None
    node_id: int | None = None
    model_shape: ModelShape | None = None
    slow_compute_s: float = 0.0
    replica: ModelReplica = field(init=False)
    _splits: dict[int, LocalSplit] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        model = self._model(self.model_shape)
        self.replica = ModelReplica(self.config.codec, layer_shapes(model), self.config.seed)

    def _model(self, shape: ModelShape | None) -> torch.nn.Module:
        """Build the run's model for ``shape``, or for the worker's own data."""
        data = self.train_set
        return build_model(
            self.config.data.model,
            in_channels=shape.in_channels if shape else data.in_channels,
            image_size=shape.image_size if shape else data.image_size,
            num_classes=shape.num_classes if shape else data.num_classes,
        )

    def local_data(self, worker: int) -> LocalSplit:
        """With local data: worker ``worker``'s own data as it trains and tests on it.

        With federated evaluation on (``data.local.evaluate_every > 0``) a seeded
        ``test_fraction`` is held out (:func:`phalanx.local_evaluation.local_split`,
        seeded by the run and the worker); otherwise it trains on all of it.
        """
        split = self._splits.get(worker)
        if split is None:
            split = self._splits[worker] = client_split(
                self.train_set, self.config.data.local, run_seed=self.config.seed, worker=worker
            )
        return split

    def evaluate(self, task: EvaluationTask, params: Tensor) -> LocalEvaluation:
        """Evaluate the global ``params`` on the worker's local test split.

        Raises
        ------
        phalanx.local_evaluation.NoTestSplitError
            When the worker holds no test split.
        phalanx.local_training.ModelDataMismatchError
            When its data does not fit the run's model.
        """
        test = self.local_data(task.worker).test
        return evaluate_locally(self._model(task.model_shape), params, test)

    def honest_updates(self, task: Task, params: Tensor) -> dict[int, Tensor]:
        """Compute the honest update of every file of the task, keyed by file id.

        With local data, the one file's update is :meth:`local_update`'s.

        Raises
        ------
        NonFiniteUpdateError
            When an update holds NaN or infinity: the worker's data or the run's
            learning rates are at fault, and an honest worker says so instead of
            sending it (the coordinator would refuse it as a lie).
        """
        return self.compute(task, params).updates

    def compute(self, task: Task, params: Tensor, *, spent_s: float = 0.0) -> Computed:
        """Compute the task's files in order, timing each, within its budget if it has one.

        ``spent_s`` is the compute already spent on the round (earlier messages of it).
        A file that finishes past the budget is dropped and the worker stops there; so
        does a worker whose budget was spent before the task.

        Raises
        ------
        NonFiniteUpdateError
            As :meth:`honest_updates`.
        """
        budget = task.budget_s
        updates: dict[int, Tensor] = {}
        times: list[float] = []
        for file, update in self._file_updates(task, params, spent_s):
            took = time.perf_counter() - update.started
            spent_s += took
            if budget is not None and spent_s > budget:
                break  # finished past the budget: dropped, as DropCompute drops it
            if not all_finite(update.value):
                raise NonFiniteUpdateError(
                    "an update computed from the model it was sent and its training data "
                    "holds NaN or infinity: check the data for NaN or Inf values, and the "
                    "learning rates"
                )
            updates[file] = update.value
            times.append(took)
        return Computed(updates, tuple(times), spent_s)

    def _file_updates(
        self, task: Task, params: Tensor, spent_s: float
    ) -> Iterator[tuple[int, _Timed]]:
        """Yield each file's update in the task's order, with when its computation began.

        Stops before a file once the task's budget is spent (``spent_s`` is what was
        spent before the task; the caller stops the iteration when a file overruns it).
        """
        budget = task.budget_s
        if budget is not None and spent_s >= budget:
            return
        started = time.perf_counter()
        if task.model_shape is not None:
            update, _ = self.local_update(task, params)
            self._slow_down()
            yield task.files[0], _Timed(update, started)
            return
        samples = task.samples_by_file()
        computing = file_updates(self.config, self.train_set, task.round, samples, params)
        for file, update in computing:
            self._slow_down()
            yield file, _Timed(update, started)
            started = time.perf_counter()

    def _slow_down(self) -> None:
        """Take ``slow_compute_s`` longer over a file (a slow device on purpose)."""
        if self.slow_compute_s:
            time.sleep(self.slow_compute_s)

    def local_update(self, task: Task, params: Tensor) -> tuple[Tensor, int]:
        """Train the run's model on the worker's own data; return the update and sample count.

        The seed is the run's, the round's and the task's one file's, so a reply is
        the same on either transport.

        Raises
        ------
        phalanx.local_training.ModelDataMismatchError
            When the worker's data does not fit the run's model.
        ValueError
            When the task does not give the worker exactly one file.
        """
        if len(task.files) != 1:
            raise ValueError(f"a local-data task names one file, this one {len(task.files)}")
        trained = compute_local_update(
            self.config,
            self._model(task.model_shape),
            self.local_data(task.worker).train,
            task.round,
            task.files[0],
            params,
        )
        return trained.update, trained.num_samples

    def handle(self, task: Task, downlink: Downlink) -> Reply:
        """Apply the downlink, then compute, encode and sign the reply to ``task``."""
        return self.answer(task, downlink).reply

    def answer(self, task: Task, downlink: Downlink, *, spent_s: float = 0.0) -> Answer:
        """Reply to ``task`` (see :meth:`handle`), after ``spent_s`` of the round's compute.

        A worker that lost the model asks for it: a reply without update (``need_sync``).
        """
        try:
            params = self.replica.apply(downlink)
        except OutOfSyncError:
            asks = Reply(
                worker=task.worker,
                client_id=self.client_id,
                run_id=task.run_id,
                round=task.round,
                nonce=task.nonce,
                files=(),
                payloads=(),
                digests=(),
                signature=b"",
                node_id=self.node_id,
                need_sync=True,
            )
            return Answer(asks, spent_s)
        computed = self.compute(task, params, spent_s=spent_s)
        updates = computed.updates
        done = task if len(updates) == len(task.files) else task.narrowed(tuple(updates))
        local = task.model_shape is not None
        trains_on = self.local_data(task.worker).train if local else self.train_set
        # A red-team adversary claims the count an honest client with its data claims.
        num_samples = len(trains_on) if local else None
        if self.behaviour is not None and updates:
            updates = self.behaviour.updates(
                updates, done, params, config=self.config, train_set=trains_on
            )
        files = done.files
        compute_s = dict(zip(computed.updates, computed.compute_s, strict=True))
        payloads = tuple(self.replica.encode(updates[f], round=task.round, file=f) for f in files)
        digests = tuple(payload_digest(p) for p in payloads)
        signature = sign_reply(
            self.private_key,
            run_id=task.run_id,
            round=task.round,
            nonce=task.nonce,
            client_id=self.client_id,
            file_ids=files,
            digests=digests,
            node_id=self.node_id,
            num_samples=num_samples,
            samples=task.samples_digest,
        )
        reply = Reply(
            worker=task.worker,
            client_id=self.client_id,
            run_id=task.run_id,
            round=task.round,
            nonce=task.nonce,
            files=files,
            payloads=payloads,
            digests=digests,
            signature=signature,
            node_id=self.node_id,
            num_samples=num_samples,
            samples=task.samples_digest,
            compute_s=tuple(compute_s[f] for f in files),
        )
        return Answer(reply, computed.spent_s)
