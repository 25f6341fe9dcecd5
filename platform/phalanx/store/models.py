"""The typed ORM models: one class per table.

The schema itself is created and changed only by the Alembic migrations in
``migrations/``; a test checks that the migrated database and these models
agree.

JSON columns are not mutation-tracked: assign a new dict (``run.summary = {...}``)
rather than changing the stored one in place.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from phalanx.store.types import BigIntegerKey, JSONType, UInt64Text, UTCDateTime, utcnow

#: Names for every constraint and index, so migrations (and SQLite batch mode) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class ClientStatus(StrEnum):
    """Where a registered client stands with the operators."""

    PENDING = "pending"
    APPROVED = "approved"
    SUSPENDED = "suspended"
    BANNED = "banned"


class Role(StrEnum):
    """What an operator key may do, from least to most."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class RunStatus(StrEnum):
    """The life cycle of a training run."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """Whether a run in this status is over."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class Severity(StrEnum):
    """How strongly a detection event points at misbehaviour."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ResponseStatus(StrEnum):
    """When a worker's response to a round arrived (:mod:`phalanx.response_times`)."""

    KEPT = "kept"
    LATE = "late"
    MISSING = "missing"


class ReviewStatus(StrEnum):
    """An operator's decision on a detection event."""

    OPEN = "open"
    CONFIRMED = "confirmed"
    DISMISSED = "dismissed"


def _string_enum(enum: type[StrEnum], name: str) -> TypeEngine[Any]:
    """Return a VARCHAR type holding the enum's values, guarded by a named CHECK."""
    return Enum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=16,
        validate_strings=True,
        values_callable=lambda members: [member.value for member in members],
    )


def _new_id() -> str:
    return str(uuid.uuid4())


class Base(DeclarativeBase):
    """Declarative base holding the metadata the migrations are compared against."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


#: Rows that hold their key: the fingerprint is unique among them only.
PROVEN = text("proven_at IS NOT NULL")


class Client(Base):
    """A worker that registered its public key; simulated workers are clients too.

    The *registry* is the clients with no ``run_id``: registered over REST (or
    enrolled), one row per key, across runs. A simulated worker's identity is
    derived from its run (:func:`phalanx.roster.simulated_identity`); its row names
    that run in ``run_id``, so events and cases can name it, and goes with the run;
    it is never listed in the registry.

    A client registered through the API is *unproven* (``proven_at`` null) until
    it signs its challenge; it expires with that challenge. Its key's fingerprint
    is unique among proven clients only, so a stranger who registers someone
    else's public key first never blocks the key's holder. Clients the platform
    creates itself (simulated workers) are proven on creation.
    """

    __tablename__ = "clients"
    __table_args__ = (
        Index(
            "ix_clients_fingerprint_proven",
            "fingerprint",
            unique=True,
            sqlite_where=PROVEN,
            postgresql_where=PROVEN,
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_new_id)
    name: Mapped[str] = mapped_column(String(200), index=True)
    public_key: Mapped[str] = mapped_column(Text, doc="PEM-encoded public key.")
    fingerprint: Mapped[str] = mapped_column(String(128))
    status: Mapped[ClientStatus] = mapped_column(
        _string_enum(ClientStatus, "client_status"), default=ClientStatus.PENDING, index=True
    )
    flower_node_id: Mapped[int | None] = mapped_column(UInt64Text, index=True)
    challenge: Mapped[str | None] = mapped_column(
        String(256), doc="Base64 challenge awaiting a proof of possession."
    )
    challenge_expires_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime, doc="When the challenge, and with it an unproven registration, expires."
    )
    registration_token_hash: Mapped[str | None] = mapped_column(
        String(64), doc="SHA-256 of the token that lets the registrant ask for a new challenge."
    )
    proven_at: Mapped[datetime | None] = mapped_column(
        UTCDateTime,
        default=utcnow,
        doc="When the client proved it holds its key; null while a registration is unproven.",
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    run_id: Mapped[str | None] = mapped_column(
        String(36),
        ForeignKey("runs.id", ondelete="CASCADE"),
        index=True,
        doc="The run a simulated worker belongs to; null for a client of the registry.",
    )


class OperatorKey(Base):
    """An API key of an operator; only the SHA-256 of the secret is stored."""

    __tablename__ = "operator_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_new_id)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[Role] = mapped_column(_string_enum(Role, "role"))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class OperatorSession(Base):
    """A dashboard login: the cookie names it, logging out or revoking the key deletes it."""

    __tablename__ = "operator_sessions"

    id: Mapped[str] = mapped_column(
        String(64), primary_key=True, doc="SHA-256 of the session secret the cookie carries."
    )
    key_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("operator_keys.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class Run(Base):
    """A training run: its config, its life cycle, and the lease of its coordinator."""

    __tablename__ = "runs"
    __table_args__ = (Index(None, "status", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_new_id)
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    status: Mapped[RunStatus] = mapped_column(
        _string_enum(RunStatus, "run_status"), default=RunStatus.QUEUED
    )
    seed: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(Integer, default=0, doc="Times the run was claimed.")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    current_round: Mapped[int | None] = mapped_column(Integer, doc="Last finished round.")
    final_model_digest: Mapped[str | None] = mapped_column(String(128))


class RunPartition(Base):
    """How a simulated local-data run divided its training split among its clients.

    One row per such run, written before its first round and never changed: the
    report of :class:`phalanx.partitions.PartitionReport` (kind, parameters, each
    client's samples and label histogram, label totals, samples no client holds).
    """

    __tablename__ = "run_partitions"

    run_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    report: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Round(Base):
    """One finished round of a run."""

    __tablename__ = "rounds"

    run_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_s: Mapped[float] = mapped_column(Float)
    timings: Mapped[dict[str, Any]] = mapped_column(JSONType, doc="Seconds per phase.")
    bytes_up: Mapped[int] = mapped_column(BigInteger)
    bytes_down: Mapped[int] = mapped_column(BigInteger)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONType)
    num_flagged: Mapped[int] = mapped_column(Integer)
    num_rejected: Mapped[int] = mapped_column(Integer)
    assignment: Mapped[dict[str, Any]] = mapped_column(JSONType, doc="Assignment summary.")
    model_digest: Mapped[str | None] = mapped_column(String(128))
    # Deferred: listings of rounds never load it; the dashboard reads one round's.
    agreement: Mapped[dict[str, Any] | None] = mapped_column(
        JSONType,
        deferred=True,
        doc="The round's agreement graph (phalanx.agreement_record); null before it was stored.",
    )


class DetectionCase(Base):
    """The detection events of one client (or worker) in one run, reviewed together.

    A case opens with its subject's first event and gathers every later one
    (:mod:`phalanx.store.cases` keeps its counts as events arrive and reviews close
    them). Its ``subject`` is ``client:<id>`` for events that name a client,
    ``worker:<index>`` for a worker without one, ``round`` for the run's round notices.
    """

    __tablename__ = "detection_cases"
    __table_args__ = (
        UniqueConstraint("run_id", "subject"),
        Index(None, "review_status", "latest_event_id"),
        Index(None, "client_id", "id"),
        CheckConstraint(
            "open_count >= 0 AND confirmed_count >= 0 AND muted_count >= 0 "
            "AND open_count + confirmed_count <= event_count",
            name="counts",
        ),
    )

    id: Mapped[int] = mapped_column(BigIntegerKey, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.id", ondelete="CASCADE"))
    subject: Mapped[str] = mapped_column(String(64))
    client_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("clients.id", ondelete="SET NULL")
    )
    worker: Mapped[int | None] = mapped_column(Integer, doc="Worker index within the run.")
    review_status: Mapped[ReviewStatus] = mapped_column(
        _string_enum(ReviewStatus, "review_status"),
        doc="Open while any event is open; then confirmed if any event was, else dismissed.",
    )
    severity: Mapped[Severity] = mapped_column(
        _string_enum(Severity, "severity"), doc="The highest severity of its events."
    )
    event_count: Mapped[int] = mapped_column(Integer)
    open_count: Mapped[int] = mapped_column(Integer)
    confirmed_count: Mapped[int] = mapped_column(Integer)
    muted_count: Mapped[int] = mapped_column(Integer, doc="Events that arrived muted.")
    first_round: Mapped[int] = mapped_column(Integer)
    last_round: Mapped[int] = mapped_column(Integer)
    latest_event_id: Mapped[int] = mapped_column(BigInteger)
    strongest_event_id: Mapped[int] = mapped_column(
        BigInteger, doc="The latest of its events of the highest severity."
    )
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    reviewed_by: Mapped[str | None] = mapped_column(String(200))
    reviewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    note: Mapped[str | None] = mapped_column(Text)


class CaseKind(Base):
    """How many events of one kind a case holds, and whether that kind is muted.

    An operator who dismisses a case may mute the kinds it dismissed: later events
    of a muted kind in that case are stored already dismissed (``muted``), never hidden.
    """

    __tablename__ = "detection_case_kinds"

    case_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("detection_cases.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    event_count: Mapped[int] = mapped_column(Integer)
    muted_by: Mapped[str | None] = mapped_column(String(200))
    muted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    mute_note: Mapped[str | None] = mapped_column(Text)


class DetectionEvent(Base):
    """Evidence that a worker misbehaved in a round, and its review."""

    __tablename__ = "detection_events"
    __table_args__ = (
        Index(None, "case_id", "id"),
        Index(None, "run_id", "id"),
        Index(None, "run_id", "round"),
        Index(None, "run_id", "review_status", "id"),
        Index(None, "client_id", "id"),
        Index(None, "kind", "id"),
        Index(None, "review_status", "id"),
        Index(None, "severity", "id"),
    )

    id: Mapped[int] = mapped_column(BigIntegerKey, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.id", ondelete="CASCADE"))
    round: Mapped[int] = mapped_column(Integer)
    client_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("clients.id", ondelete="SET NULL")
    )
    worker: Mapped[int | None] = mapped_column(Integer, doc="Worker index within the run.")
    kind: Mapped[str] = mapped_column(String(64))
    severity: Mapped[Severity] = mapped_column(_string_enum(Severity, "severity"))
    evidence: Mapped[dict[str, Any]] = mapped_column(JSONType)
    review_status: Mapped[ReviewStatus] = mapped_column(
        _string_enum(ReviewStatus, "review_status"), default=ReviewStatus.OPEN
    )
    reviewed_by: Mapped[str | None] = mapped_column(String(200))
    reviewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    case_id: Mapped[int | None] = mapped_column(
        BigInteger,
        ForeignKey("detection_cases.id", ondelete="SET NULL"),
        doc="Its case (phalanx.store.cases); every event recorded since cases exist has one.",
    )
    muted: Mapped[bool] = mapped_column(
        Boolean,
        default=False,
        server_default=false(),
        doc="Arrived dismissed: its kind was muted for its case (reviewed_by says by whom).",
    )


#: The largest finite double: a time above it (infinity) or beyond order (NaN on
#: PostgreSQL, which sorts NaN above every number) fails the CHECK; SQLite stores NaN as
#: NULL, which the CHECK pairing NULL with ``missing`` refuses.
MAX_FINITE = "1.7976931348623157e308"


class WorkerResponseRow(Base):
    """How long one dispatched worker's response to a round took; slow is not lying.

    One row per worker given work in a timed round (by the systems model, or a
    deployed round's real arrival times); none for other rounds. ``seconds`` is null
    exactly for a missing response; a deployed round's missing response becomes
    ``late`` when the reply comes during a later round.
    """

    __tablename__ = "worker_responses"
    __table_args__ = (
        Index(None, "client_id", "run_id", "round"),
        CheckConstraint(
            f"seconds IS NULL OR (seconds >= 0 AND seconds <= {MAX_FINITE})",
            name="finite_seconds",
        ),
        CheckConstraint(
            "(seconds IS NULL AND status = 'missing') OR "
            "(seconds IS NOT NULL AND status <> 'missing')",
            name="missing_has_no_time",
        ),
    )

    run_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    round: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker: Mapped[int] = mapped_column(
        Integer, primary_key=True, doc="Worker index within the run."
    )
    client_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("clients.id", ondelete="SET NULL")
    )
    seconds: Mapped[float | None] = mapped_column(
        Float, doc="When its last piece arrived, in seconds since the round started."
    )
    status: Mapped[ResponseStatus] = mapped_column(_string_enum(ResponseStatus, "response_status"))


class ClientRoundRow(Base):
    """One worker's row of a local-data round, for the run page's per-client view.

    Its claimed sample count, the distance of its update to the round's aggregate
    (and that over the round's median distance), and its federated evaluation
    report as it counted (:mod:`phalanx.client_rounds`). A value is null when the
    round has none for the worker (no accepted update, no evaluation that round).
    """

    __tablename__ = "client_rounds"
    __table_args__ = (
        CheckConstraint(
            f"distance IS NULL OR (distance >= 0 AND distance <= {MAX_FINITE})",
            name="finite_distance",
        ),
        CheckConstraint(
            f"distance_ratio IS NULL OR (distance_ratio >= 0 AND distance_ratio <= {MAX_FINITE})",
            name="finite_distance_ratio",
        ),
        CheckConstraint(
            "eval_status IS NULL OR eval_status IN "
            "('counted', 'clipped', 'refused', 'failed', 'silent')",
            name="eval_status",
        ),
        CheckConstraint(
            "eval_accuracy IS NULL OR (eval_accuracy >= 0 AND eval_accuracy <= 1)",
            name="eval_accuracy_in_unit",
        ),
        CheckConstraint(
            f"eval_loss IS NULL OR (eval_loss >= 0 AND eval_loss <= {MAX_FINITE})",
            name="finite_eval_loss",
        ),
    )

    run_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    round: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker: Mapped[int] = mapped_column(
        Integer, primary_key=True, doc="Worker index within the run."
    )
    client_id: Mapped[str | None] = mapped_column(
        String(36), ForeignKey("clients.id", ondelete="SET NULL")
    )
    samples: Mapped[int | None] = mapped_column(BigInteger, doc="The count its reply claimed.")
    distance: Mapped[float | None] = mapped_column(Float)
    distance_ratio: Mapped[float | None] = mapped_column(Float)
    eval_status: Mapped[str | None] = mapped_column(String(16))
    eval_loss: Mapped[float | None] = mapped_column(Float)
    eval_accuracy: Mapped[float | None] = mapped_column(Float)
    eval_samples: Mapped[int | None] = mapped_column(BigInteger)


class Checkpoint(Base):
    """A model checkpoint file written after a round."""

    __tablename__ = "checkpoints"

    run_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    round: Mapped[int] = mapped_column(Integer, primary_key=True)
    path: Mapped[str] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditEntry(Base):
    """Who did what to whom, and when."""

    __tablename__ = "audit_log"
    __table_args__ = (Index(None, "target_type", "target_id"),)

    id: Mapped[int] = mapped_column(BigIntegerKey, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(200), index=True)
    action: Mapped[str] = mapped_column(String(100))
    target_type: Mapped[str | None] = mapped_column(String(50))
    target_id: Mapped[str | None] = mapped_column(String(100))
    details: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
