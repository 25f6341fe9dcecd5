"""An honest worker: compute each assigned file's update, encode, sign, reply."""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric import ec
from torch import Tensor

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.detection import payload_digest
from phalanx.finite import all_finite
from phalanx.identity import sign_reply
from phalanx.nets import build_model, layer_shapes
from phalanx.replies import Reply, Task
from phalanx_clients.behaviour import Behaviour
from phalanx_clients.file_updates import compute_file_updates
from phalanx_clients.replica import ModelReplica, OutOfSyncError


class NonFiniteUpdateError(ArithmeticError):
    """An honest computation gave a NaN or infinite update."""


@dataclass
class Worker:
    """One worker of a run, with its data, key and copy of the global model.

    Parameters
    ----------
    config : RunConfig
        The run, as the coordinator sent it.
    train_set : ImageDataset
        The training data the worker's files index into.
    client_id : str
        The worker's registered client id.
    private_key : ec.EllipticCurvePrivateKey
        Signs every reply.
    behaviour : Behaviour or None
        ``None`` for an honest worker; a red-team behaviour otherwise.
    node_id : int or None
        The Flower node id, bound into the signature when known.
    """

    config: RunConfig
    train_set: ImageDataset
    client_id: str
    private_key: ec.EllipticCurvePrivateKey
    behaviour: Behaviour | None = None
    node_id: int | None = None
    replica: ModelReplica = field(init=False)

    def __post_init__(self) -> None:
        model = build_model(
            self.config.data.model,
            in_channels=self.train_set.in_channels,
            image_size=self.train_set.image_size,
            num_classes=self.train_set.num_classes,
        )
        self.replica = ModelReplica(self.config.codec, layer_shapes(model), self.config.seed)

    def honest_updates(self, task: Task, params: Tensor) -> dict[int, Tensor]:
        """Compute the honest update of every file of the task, keyed by file id.

        Raises
        ------
        NonFiniteUpdateError
            When an update holds NaN or infinity: the worker's data or the run's
            learning rates are at fault, and an honest worker says so instead of
            sending it (the coordinator would refuse it as a lie).
        """
        updates = compute_file_updates(self.config, self.train_set, task.round, task.files, params)
        if not all(all_finite(update) for update in updates.values()):
            raise NonFiniteUpdateError(
                "an update computed from the model it was sent and its training data holds "
                "NaN or infinity: check the data for NaN or Inf values, and the learning rates"
            )
        return updates

    def handle(self, task: Task, downlink: Downlink) -> Reply:
        """Apply the downlink, then compute, encode and sign the reply to ``task``."""
        try:
            params = self.replica.apply(downlink)
        except OutOfSyncError:
            return Reply(
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
        updates = self.honest_updates(task, params)
        if self.behaviour is not None:
            updates = self.behaviour.updates(
                updates, task, params, config=self.config, train_set=self.train_set
            )
        files = tuple(sorted(updates))
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
        )
        return Reply(
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
        )
