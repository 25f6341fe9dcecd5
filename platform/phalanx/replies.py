"""Work orders and replies as the coordinator sees them, and the checks on a reply.

A reply that fails any check is rejected whole and becomes a detection event of
its own kind; the round goes on without it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import torch
from cryptography.hazmat.primitives.asymmetric import ec
from torch import Tensor

from phalanx.data_mode import ModelShape
from phalanx.detection import Replica, payload_digest
from phalanx.finite import all_finite
from phalanx.identity import IdentityError, verify_reply

Decoder = Callable[[bytes], Tensor]
Hasher = Callable[[bytes], str]


MAX_SAMPLES = 2**53
"""Largest sample count a reply may claim (every count up to it is exact in float64)."""

MAX_COMPUTE_S = 7 * 24 * 3600.0
"""Longest compute time a task's budget may give or a reply may claim for one file: a week."""


@dataclass(frozen=True)
class Task:
    """One worker's work for one round (the model travels beside it).

    ``files`` are the slots of the worker's updates in the round. With assigned
    data, ``samples`` holds each file's sample indices, aligned with ``files``
    (the coordinator's :func:`phalanx.plan.round_samples`, drawn once per round),
    so a worker learns its part of the round's plan from its task alone, without
    rebuilding the federation's; its reply signs their digest
    (:attr:`samples_digest`). With local data (``model_shape`` given) the worker
    trains on its own data and its one file only labels its update: the task
    carries no sample index, and the reply must report (and sign) its sample count.

    ``budget_s`` (DropCompute in a deployment, ``collect.drop_compute``) is the
    seconds of compute the worker may spend on the task's files this round: it
    computes them in the task's order and sends those finished within the budget,
    a prefix of ``files`` (:func:`check_reply` with ``partial``).
    """

    run_id: str
    round: int
    nonce: str
    worker: int
    files: tuple[int, ...]
    model_shape: ModelShape | None = None
    samples: tuple[tuple[int, ...], ...] | None = None
    budget_s: float | None = None

    def __post_init__(self) -> None:
        # Built by the coordinator, or read by a worker from a message it was sent
        # (``read_task`` refuses a bad budget first): a bad one here is a bug.
        budget = self.budget_s
        if budget is not None and not (
            isinstance(budget, float) and math.isfinite(budget) and 0 < budget <= MAX_COMPUTE_S
        ):
            raise ValueError(
                f"a task's compute budget must be a float in (0, {MAX_COMPUTE_S:g}] s, "
                f"got {budget!r}"
            )

    def narrowed(self, files: Sequence[int]) -> Task:
        """Return this task for ``files`` alone (a message of one file, or a chunk of them).

        ``files`` keep the task's order; with assigned data each keeps its samples, so
        the narrowed task's :attr:`samples_digest` names those files' samples alone.

        Raises
        ------
        ValueError
            When ``files`` are not among the task's files, or repeat one.
        """
        chosen = set(files)
        if len(chosen) != len(files) or not chosen <= set(self.files):
            raise ValueError(f"files {list(files)[:8]} are not distinct files of this task")
        kept = tuple(f for f in self.files if f in chosen)
        samples = None
        if self.samples is not None:
            by_file = self.samples_by_file()
            samples = tuple(by_file[f] for f in kept)
        return dataclasses.replace(self, files=kept, samples=samples)

    @property
    def local(self) -> bool:
        """Whether the worker trains on its own data (``data.mode = "local"``)."""
        return self.model_shape is not None

    def samples_by_file(self) -> dict[int, tuple[int, ...]]:
        """Return file id -> its sample indices (assigned data).

        Raises
        ------
        ValueError
            When the task names no samples, or not one tuple of them per file.
        """
        if self.samples is None:
            raise ValueError("this task names no samples: with assigned data every task does")
        if len(self.samples) != len(self.files):
            raise ValueError(
                f"the task names {len(self.files)} files but samples for {len(self.samples)}"
            )
        return dict(zip(self.files, self.samples, strict=True))

    @cached_property
    def samples_digest(self) -> str | None:
        """The digest of the task's files and their sample indices; ``None`` without samples.

        Computed once per task (the worker signs it, the coordinator checks it).
        """
        return None if self.samples is None else samples_digest(self.files, self.samples)


def samples_digest(files: Sequence[int], samples: Sequence[Sequence[int]]) -> str:
    """SHA-256 (hex) of each file id paired with its sample indices, in the order given.

    What a reply signs to bind the samples its task named: a worker that trained on
    other indices (a task changed on the way) signs a digest the coordinator's own
    task does not give, and its signature does not verify.

    Raises
    ------
    ValueError
        When ``files`` and ``samples`` differ in length.
    """
    if len(files) != len(samples):
        raise ValueError(f"{len(files)} files but sample indices for {len(samples)}")
    body = [[int(f), [int(i) for i in idx]] for f, idx in zip(files, samples, strict=True)]
    text = json.dumps(body, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Reply:
    """What a worker sent back, before any check."""

    worker: int
    client_id: str
    run_id: str
    round: int
    nonce: str
    files: tuple[int, ...]
    payloads: tuple[bytes, ...]
    digests: tuple[str, ...]
    signature: bytes
    node_id: int | None = None
    need_sync: bool = False
    num_samples: int | None = None
    """Local data: the samples the worker trained on, signed with the digests."""
    samples: str | None = None
    """Assigned data: the digest of the sample indices the worker was asked to train on
    (:attr:`Task.samples_digest`), signed with the digests."""
    compute_s: tuple[float, ...] = ()
    """The seconds the worker says it spent computing each file it sends, aligned with
    ``files`` (or none): a claim, unsigned, read only to choose DropCompute's budget
    and bounded there by the reply's real response time."""
    asked: tuple[int, ...] | None = None
    """The files of the message this reply answers, set by the coordinator's transport
    from what it sent (never read from the reply); ``None``: the worker's whole task."""

    @property
    def num_bytes(self) -> int:
        """Bytes on the wire for the payloads, digests and signature."""
        return self.work_bytes + len(self.signature)

    @property
    def work_bytes(self) -> int:
        """Bytes of the payloads and digests: what the work alone determines.

        A DER ECDSA signature's length varies by a byte or two from one signature to
        the next, so a model that must replay identically (the simulated clock) times
        these bytes and leaves the signature out.
        """
        return sum(len(p) for p in self.payloads) + sum(len(d) for d in self.digests)


@dataclass(frozen=True)
class Rejection:
    """Why a reply was refused: a detection event of kind ``kind``."""

    worker: int
    kind: str
    reason: str


class ReplyRejectedError(Exception):
    """Raised inside the checks; carries the event kind."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def float32_payload(update: Tensor) -> bytes:
    """Encode an update as raw little-endian float32 (the codec-less wire format)."""
    return update.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()


def make_float32_decoder(dim: int) -> Decoder:
    """Make the decoder of :func:`float32_payload`, insisting on ``dim`` values."""

    def decode(payload: bytes) -> Tensor:
        if len(payload) != 4 * dim:
            raise ReplyRejectedError(
                "bad_shape", f"payload holds {len(payload)} bytes, expected {4 * dim}"
            )
        return torch.frombuffer(bytearray(payload), dtype=torch.float32)

    return decode


def check_reply(
    reply: Reply,
    task: Task,
    *,
    client_id: str,
    public_key: ec.EllipticCurvePublicKey,
    decode: Decoder,
    digest: Hasher = payload_digest,
    partial: bool = False,
) -> list[Replica]:
    """Check a reply against its task and return its replicas, one per file of the task.

    ``digest`` computes a payload's :func:`~phalanx.detection.payload_digest`;
    a caller checking many replies may pass one that remembers the payloads it
    has hashed already. With ``partial`` (DropCompute: the task had a compute
    budget) the reply may cover the first files of its task, in the task's order,
    and no others: it cuts at a file boundary every replica shares and says, signed,
    what it covers; the files it leaves out are not in it, neither a lie nor a fault.

    Raises
    ------
    ReplyRejectedError
        With ``kind`` one of ``stale_round``, ``wrong_nonce``, ``malformed_reply``,
        ``unassigned_file``, ``bad_signature``, ``bad_shape``, ``non_finite``.
        A local-data task's reply must carry a sample count in ``1 ..``
        :data:`MAX_SAMPLES`; an assigned-data task's reply must carry none.
    """
    if reply.run_id != task.run_id or reply.round != task.round:
        raise ReplyRejectedError(
            "stale_round",
            f"reply is for run {reply.run_id} round {reply.round}, "
            f"expected run {task.run_id} round {task.round}",
        )
    if reply.nonce != task.nonce:
        raise ReplyRejectedError("wrong_nonce", "reply carries a nonce this round never issued")
    if reply.client_id != client_id:
        raise ReplyRejectedError(
            "malformed_reply", f"reply claims client {reply.client_id}, expected {client_id}"
        )
    n = len(reply.files)
    if len(reply.payloads) != n or len(reply.digests) != n or len(set(reply.files)) != n:
        raise ReplyRejectedError(
            "malformed_reply", "files, payloads and digests differ in length or repeat a file"
        )
    unassigned = sorted(set(reply.files) - set(task.files))
    if unassigned:
        raise ReplyRejectedError("unassigned_file", f"reply includes unassigned files {unassigned}")
    if partial:
        if reply.files != task.files[: len(reply.files)]:
            raise ReplyRejectedError(
                "malformed_reply",
                f"reply covers files {list(reply.files)[:8]}, not the first {len(reply.files)} "
                "of its task in order (a compute budget cuts between files, in order)",
            )
    else:
        # A worker answers every file it was given in one reply: one that leaves files out
        # would look quick and complete on the record while its holders' replicas go missing.
        left_out = sorted(set(task.files) - set(reply.files))
        if left_out:
            raise ReplyRejectedError(
                "malformed_reply", f"reply leaves out assigned files {left_out}"
            )
    _check_count(reply.num_samples, local=task.local)
    if reply.samples != task.samples_digest:
        raise ReplyRejectedError(
            "malformed_reply", "reply answers other sample indices than its task named"
        )
    try:
        verified = verify_reply(
            public_key,
            reply.signature,
            run_id=reply.run_id,
            round=reply.round,
            nonce=reply.nonce,
            client_id=reply.client_id,
            file_ids=reply.files,
            digests=reply.digests,
            node_id=reply.node_id,
            num_samples=reply.num_samples,
            samples=reply.samples,
        )
    except IdentityError as exc:  # fields that cannot even be signed
        raise ReplyRejectedError("malformed_reply", f"reply cannot be verified: {exc}") from exc
    if not verified:
        raise ReplyRejectedError("bad_signature", "signature does not verify with the client's key")
    replicas = []
    for file, payload, claimed in zip(reply.files, reply.payloads, reply.digests, strict=True):
        if digest(payload) != claimed:
            raise ReplyRejectedError(
                "malformed_reply", f"file {file}: payload does not match digest"
            )
        try:
            value = decode(payload)
        except ReplyRejectedError:
            raise
        except Exception as exc:  # a decoder refuses garbage with its own error type
            raise ReplyRejectedError("malformed_reply", f"file {file}: {exc}") from exc
        if not all_finite(value):
            raise ReplyRejectedError("non_finite", f"file {file}: update holds NaN or Inf")
        replicas.append(Replica(worker=reply.worker, file=file, value=value, digest=claimed))
    return replicas


def _check_count(count: object, *, local: bool) -> None:
    """Refuse a sample count the task did not ask for, or a missing or impossible one."""
    if not local:
        if count is not None:
            raise ReplyRejectedError(
                "malformed_reply", "reply reports a sample count, which assigned data has not"
            )
        return
    if count is None:
        raise ReplyRejectedError(
            "malformed_reply", "reply reports no sample count, which local data needs"
        )
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SAMPLES:
        shown = repr(count)[:40] if type(count) is int else type(count).__name__
        raise ReplyRejectedError(
            "malformed_reply", f"sample count {shown} is not a whole number in 1..2**53"
        )
