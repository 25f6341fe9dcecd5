"""Request and response bodies of the REST API (pydantic v2).

Responses are built from the store's ORM rows or read-only records with
``Model.model_validate(row)`` (``from_attributes``), once; FastAPI then only
checks the model's type and serializes it to JSON in pydantic's Rust core.
Text that ends up in the database is checked for what SQLite and PostgreSQL
cannot store (NUL characters, lone surrogates), so such input is a 422 with a
message rather than a database error.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from phalanx.agreement_record import MAX_CLIQUES, MAX_CONFLICTS, MAX_DIGESTS
from phalanx.config import RunConfig
from phalanx.response_times import SLOW_RATIO, SLOW_ROUNDS, WINDOW
from phalanx.store import ClientStatus, ReviewStatus, Role, RunStatus, Severity
from phalanx.store.cases import MAX_REVIEW_CASES
from phalanx_api.names import MAX_CLIENT_NAME, client_name

#: Longest page any listing returns.
MAX_PAGE_SIZE = 500
#: Page size when the caller gives none.
DEFAULT_PAGE_SIZE = 50


def storable_text(value: str) -> str:
    """Return ``value`` if both databases can store it.

    Raises
    ------
    ValueError
        When it holds a NUL character or a lone surrogate.
    """
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from exc
    return value


#: A human-readable name, as the ``name`` columns hold it.
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
    AfterValidator(storable_text),
]
#: A client's name, as it registers: see :mod:`phalanx_api.names` for the rules.
ClientName = Annotated[
    str,
    Field(
        max_length=4 * MAX_CLIENT_NAME,
        description=(
            f"At most {MAX_CLIENT_NAME} characters once trimmed; no control, format, "
            "bidirectional or invisible characters; unique among active clients."
        ),
    ),
    AfterValidator(client_name),
]
#: Free text from an operator, such as a review note.
Note = Annotated[str, StringConstraints(max_length=2000), AfterValidator(storable_text)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# ----------------------------------------------------------------- errors


class ErrorOut(BaseModel):
    """Every 4xx and 5xx answer: what went wrong, in words."""

    detail: str = Field(examples=["run '3f0c...' not found"])


class FieldErrorOut(BaseModel):
    """One invalid field of a request."""

    loc: list[str | int] = Field(description="Where: 'body', 'query' or 'path', then the field.")
    msg: str
    type: str


class ValidationErrorOut(BaseModel):
    """A 422 answer: a message naming the fields, and the errors one by one."""

    detail: str = Field(examples=["body.assignment.r: Input should be less than or equal to 64"])
    errors: list[FieldErrorOut]


# ---------------------------------------------------------------- clients


class ClientRegistrationIn(_In):
    """A client's request to join: its name and its EC public key."""

    name: ClientName
    public_key: str = Field(
        min_length=1,
        max_length=8192,
        description="NIST P-256 or P-384 public key, PEM ('BEGIN PUBLIC KEY') or one OpenSSH line.",
    )


class ClientRegistrationOut(BaseModel):
    """The registered client and the challenge it must sign."""

    id: str
    status: ClientStatus
    challenge: str = Field(description="Base64 of random bytes; sign the decoded bytes.")
    expires_at: datetime = Field(
        description="When the challenge expires, and the registration with it unless proven."
    )
    registration_token: str = Field(
        description=(
            "Secret of this registration: send it as X-Registration-Token to "
            "POST /clients/{id}/challenge for a new challenge. Only its hash is stored."
        )
    )


class ChallengeOut(BaseModel):
    """A fresh challenge for a registration that has not proven its key yet."""

    id: str
    challenge: str = Field(description="Base64 of random bytes; sign the decoded bytes.")
    expires_at: datetime


class ProofIn(_In):
    """Proof of possession: the client's signature over its challenge."""

    signature: str = Field(
        min_length=1,
        max_length=1024,
        description="Base64 of the DER ECDSA-SHA256 signature over the decoded challenge bytes.",
    )


class ClientStatusOut(BaseModel):
    """A client's id and where it stands."""

    id: str
    status: ClientStatus


class StatusChangeIn(_In):
    """Why an operator changes a client's status (kept in the audit log)."""

    reason: Note = ""


class ClientOut(_Out):
    """A registered client."""

    id: str
    name: str
    public_key: str = Field(description="PEM.")
    fingerprint: str
    status: ClientStatus
    flower_node_id: str | None = Field(
        description="Unsigned 64-bit Flower node id, as decimal text (beyond JSON's safe integers)."
    )
    proven_at: datetime | None = Field(
        description="When the client proved it holds its key; null while unproven."
    )
    created_at: datetime
    approved_at: datetime | None
    last_seen_at: datetime | None
    run_id: str | None = Field(
        description=(
            "The run a simulated worker belongs to (its identity derived from that run); "
            "null for a client of the registry."
        )
    )

    @field_validator("flower_node_id", mode="before")
    @classmethod
    def _node_id_as_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) else value


class ClientPage(BaseModel):
    """One page of clients, oldest registration first."""

    items: list[ClientOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


# ------------------------------------------------------------------- runs


class RunLaunchIn(RunConfig):
    """The run config (as in ``phalanx run CONFIG``), with the same limits.

    The limits on workers and files live in :class:`~phalanx.config.RunConfig`
    and are checked on the coerced values, so ``100000.0`` or ``"100000"``
    workers are refused like ``100000``. ``idx:``/``npz:`` datasets must lie in
    the server's datasets directory, which the launch checks.
    """


class RunOut(_Out):
    """A training run and its life cycle."""

    id: str
    name: str
    status: RunStatus
    seed: int
    config: dict[str, Any] = Field(description="The run config, as launched.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    claimed_by: str | None
    attempts: int
    cancel_requested: bool
    error: str | None
    summary: dict[str, Any] | None
    current_round: int | None = Field(description="Last finished round.")
    final_model_digest: str | None


class PartitionOut(BaseModel):
    """How a simulated local-data run divided its training split among its clients."""

    kind: str = Field(description="iid, dirichlet, shards or quantity (data.partition.kind).")
    parameters: dict[str, float | int | str | bool] = Field(
        description="The partition's parameters, defaults filled in (alpha, seed, ...)."
    )
    num_classes: int
    samples: list[int] = Field(description="Samples of each client, client i at position i.")
    label_totals: list[int] = Field(description="Samples of each label over all clients.")
    unassigned: int = Field(description="Samples of the split that no client holds.")
    histograms: list[list[int]] | None = Field(
        description="histograms[c][l]: samples of label l held by client c; null when "
        "clients x classes exceeds 100,000 counts."
    )


class RunDetailOut(RunOut):
    """One run, with what only its own page needs."""

    partition: PartitionOut | None = Field(
        description="data.mode = 'local' in simulation: the run's partition among its "
        "clients; null for other runs."
    )


class ClientViewOut(BaseModel):
    """One client's latest figures in a local-data run (null: nothing recorded for it)."""

    model_config = ConfigDict(from_attributes=True)

    worker: int
    client_id: str | None
    part: int | None = Field(description="Samples the run's partition gave it (simulation).")
    samples: int | None = Field(description="The sample count its latest accepted reply claimed.")
    distance_round: int | None = Field(description="The round its distance is of.")
    distance: float | None = Field(
        description="L2 distance of its update to that round's applied aggregate."
    )
    distance_ratio: float | None = Field(
        description="distance over the round's median distance (1: typical)."
    )
    eval_round: int | None = Field(description="The latest round with a federated evaluation.")
    eval_status: str | None = Field(
        description="counted, clipped (loss above 100), refused (impossible report), failed, "
        "or silent (asked, and sent nothing before the exchange closed); null: not asked."
    )
    eval_loss: float | None = Field(description="Its loss as it counted (bounded).")
    eval_accuracy: float | None = Field(description="Its local accuracy as it counted, in [0, 1].")
    eval_samples: int | None = Field(description="Its test-split count as it counted (capped).")
    flags: int = Field(description="Flag events detection gave it in this run.")


class ClientViewPage(BaseModel):
    """One page of a local-data run's per-client view, by worker."""

    items: list[ClientViewOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


class RunPage(BaseModel):
    """One page of runs, newest first."""

    items: list[RunOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


class RoundOut(_Out):
    """One finished round of a run."""

    run_id: str
    number: int
    started_at: datetime
    finished_at: datetime
    duration_s: float
    timings: dict[str, Any] = Field(description="Seconds per phase.")
    bytes_up: int
    bytes_down: int
    metrics: dict[str, Any]
    num_flagged: int
    num_rejected: int
    assignment: dict[str, Any] = Field(description="Assignment summary.")
    model_digest: str | None


class RoundDetailOut(RoundOut):
    """One finished round with its agreement graph.

    The listing of a run's rounds leaves the graph out, as it can take tens of
    kilobytes per round at thousands of workers.
    """

    agreement: dict[str, Any] | None = Field(
        description=(
            "The round's agreement graph as detection saw it: the workers that replied "
            "('replied', as [first, last] ranges), the 'rule' that decided, the 'conflicts' "
            f"(pairs of workers that disagreed, with the files they disagreed on; at most "
            f"{MAX_CONFLICTS:,}, of 'num_conflicts'), 'degrees' of the workers that had a "
            f"conflict, and up to {MAX_CLIQUES} maximum cliques, each as the workers outside "
            "it ('outside_max_cliques', of 'num_max_cliques'), and the round's agreeing group "
            "('agreeing', as [first, last] ranges: the workers each flag's evidence was "
            "measured against; an event holds only its count and digest), and the full "
            f"payload 'digests' of the replicas the round's flags name (sorted; at most "
            f"{MAX_DIGESTS:,}, of 'num_digests'; an event names each by its first 32 hex "
            "digits). Null for rounds recorded before rounds kept it."
        )
    )


class WorkerResponsesOut(_Out):
    """One worker's response times over a run (:mod:`phalanx.response_times`).

    Being slow is never a detection event: it is reported here and on the run
    page, never in the review queue, and never bans anyone.
    """

    worker: int
    client_id: str | None = Field(description="The client behind the worker, when known.")
    rounds: int = Field(description="Rounds it was given work.")
    kept: int = Field(description="Of them, replies that arrived by the round's close.")
    late: int = Field(description="Of them, replies that arrived after the close.")
    missing: int = Field(description="Of them, replies that never arrived (whole).")
    mean_s: float | None = Field(description="Mean of its known times; null if none.")
    median_s: float | None = Field(description="Median of its known times; null if none.")
    p90_s: float | None = Field(
        description="90th percentile of its known times (nearest rank); null if none."
    )
    recent: int = Field(description=f"Its last rounds given work, at most {WINDOW}.")
    slow_rounds: int = Field(
        description=(
            f"Of those, rounds whose reply never arrived or took at least {SLOW_RATIO:g} "
            "times the run's median response."
        )
    )
    slow: bool = Field(
        description=f"Persistently slow: at least {SLOW_ROUNDS} slow rounds among its last "
        f"{WINDOW}."
    )
    slow_reason: str | None = Field(description="Why it is slow, in words; null if it is not.")


class ResponseTimesPage(BaseModel):
    """One page of a run's workers with their response times, by worker.

    Rounds the systems model timed (``systems.enabled``) and deployed rounds (real
    arrival times; a reply after its round closed is recorded late when it comes
    during a later round) have response times; other rounds have none.
    """

    items: list[WorkerResponsesOut]
    median_s: float | None = Field(
        description="The run's median response: every known time, every worker and round."
    )
    slow_workers: int = Field(description="Persistently slow workers in the whole run.")
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


# ----------------------------------------------------------------- events


class _EventFields(_Out):
    """What every form of a detection event carries."""

    id: int
    run_id: str
    round: int
    client_id: str | None
    worker: int | None
    kind: str
    severity: Severity
    review_status: ReviewStatus
    reviewed_by: str | None
    reviewed_at: datetime | None
    note: str | None
    created_at: datetime
    case_id: int | None = Field(description="Its case: GET /api/v1/cases/{case_id}.")
    muted: bool = Field(
        description="Arrived dismissed because its kind was muted for its case by 'reviewed_by'."
    )


class EventOut(_EventFields):
    """A detection event: evidence that a worker misbehaved in a round."""

    evidence: dict[str, Any] = Field(
        description="Everything detection recorded; its 'summary' explains it in words. A "
        "flag's 'agreeing' is the group it was measured against, as a 'count' and the "
        "SHA-256 'digest' of its members (written '0,1,2,5'); the members are in the "
        "round's agreement ('agreeing'), GET /api/v1/runs/{run_id}/rounds/{number}. Each "
        "disputed file's 'replicas' hold their worker, the first 32 hex digits of their "
        "payload digest (the full digests are in that agreement's 'digests') and, but the "
        "flagged worker's, their 'distance' to its replica and whether they 'agree'; "
        "events recorded before list full digests and every pair under 'distances'. "
        "Fields that do not apply to the event's kind are left out."
    )


class EventSummaryOut(_EventFields):
    """A detection event as listings show it: its evidence in one paragraph.

    ``GET /api/v1/events/{event_id}`` has the full evidence; so have listings
    asked for ``evidence=full``.
    """

    summary: str | None = Field(
        description=(
            "The evidence in one plain-English paragraph; for a refused reply, the reason "
            "it was refused; null when the evidence has neither."
        )
    )
    evidence: dict[str, Any] | None = Field(
        default=None, description="The full evidence with 'evidence=full'; null otherwise."
    )


class EventPage(BaseModel):
    """One page of detection events, newest first."""

    items: list[EventSummaryOut]
    next_before: int | None = Field(
        description="Pass as 'before' to get the next page; null on the last."
    )


class ReviewIn(_In):
    """An operator's decision on a detection event."""

    decision: Literal["confirm", "dismiss"]
    note: Note = ""


class ReviewOut(EventOut):
    """The reviewed event, and what the review did to its client."""

    client_status: ClientStatus | None = Field(
        description="The client's status after the review; null when the event has no client."
    )
    client_banned: bool = Field(description="Whether this review banned the client.")


# ------------------------------------------------------------------ cases


class CaseKindOut(_Out):
    """How many events of one kind a case holds, and who muted the kind, if anyone."""

    kind: str
    events: int = Field(validation_alias="event_count")
    muted_by: str | None = Field(description="Who muted the kind for this case; null if nobody.")
    muted_at: datetime | None
    mute_note: str | None


class CaseOut(_Out):
    """A case: the detection events of one client (or worker) in one run."""

    id: int
    run_id: str
    subject: str = Field(
        description=(
            "'client:<id>', 'worker:<index>' (no client) or 'round' (the run's round notices)."
        )
    )
    client_id: str | None
    worker: int | None
    review_status: ReviewStatus = Field(
        description="open while any event is open; then confirmed if any event was, else dismissed."
    )
    severity: Severity = Field(description="The highest severity of its events.")
    event_count: int
    open_count: int
    confirmed_count: int
    dismissed_count: int
    muted_count: int = Field(description="Events that arrived dismissed, their kind muted.")
    first_round: int
    last_round: int
    opened_at: datetime
    updated_at: datetime
    reviewed_by: str | None = Field(description="Who last reviewed the case as a whole.")
    reviewed_at: datetime | None
    note: str | None
    kinds: list[CaseKindOut] = Field(description="Its kinds, most frequent first.")
    latest: EventSummaryOut = Field(description="Its latest event.")
    strongest: EventSummaryOut = Field(
        description="The latest of its events of the highest severity (may be the latest)."
    )


class CasePage(BaseModel):
    """One page of cases."""

    items: list[CaseOut]
    total: int = Field(description="Cases matching the filters, over every page.")
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


class CaseReviewIn(_In):
    """An operator's decision on a case: it closes every open event of the case."""

    decision: Literal["confirm", "dismiss"]
    note: Note = Field(default="", description="Why; kept on the case and on each event closed.")
    mute: bool = Field(
        default=False,
        description=(
            "With 'dismiss': also mute the kinds dismissed, for this client in this run; "
            "later events of those kinds arrive dismissed (stored, marked muted)."
        ),
    )


class CasesReviewIn(CaseReviewIn):
    """The same decision on several cases at once: all of them, or none."""

    case_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(
        min_length=1,
        max_length=MAX_REVIEW_CASES,
        description=f"The cases, each once; at most {MAX_REVIEW_CASES}.",
    )

    @field_validator("case_ids")
    @classmethod
    def _each_once(cls, value: list[int]) -> list[int]:
        repeated = sorted(v for v, n in Counter(value).items() if n > 1)
        if repeated:
            raise ValueError(f"each case may be named once; repeated: {repeated}")
        return value


class CaseReviewOut(BaseModel):
    """A reviewed case, and what the review did to its client."""

    case: CaseOut
    closed_events: int = Field(description="Open events this review closed.")
    client_status: ClientStatus | None = Field(
        description="The client's status after the review; null when the case has no client."
    )
    client_banned: bool = Field(description="Whether this review banned the client.")
    muted_kinds: list[str] = Field(description="Kinds this review muted for the case.")


class CasesReviewOut(BaseModel):
    """Each reviewed case, in the order asked."""

    items: list[CaseReviewOut]


#: A kind as a request names it: the event vocabulary's spelling.
KindName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_]+$")]


class CaseUnmuteIn(_In):
    """Lift mutes of a case: later events of these kinds arrive open again."""

    kinds: list[KindName] | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The kinds to unmute, each muted for the case; every muted kind if omitted.",
    )
    note: Note = Field(default="", description="Why; kept in the audit log.")

    @field_validator("kinds")
    @classmethod
    def _each_once(cls, value: list[str] | None) -> list[str] | None:
        repeated = sorted(v for v, n in Counter(value or []).items() if n > 1)
        if repeated:
            raise ValueError(f"each kind may be named once; repeated: {repeated}")
        return value


class LiftedMuteOut(BaseModel):
    """A mute lifted: the kind, and who had muted it, when and why."""

    kind: str
    muted_by: str | None
    muted_at: datetime | None
    mute_note: str | None


class CaseUnmuteOut(BaseModel):
    """The case after the unmute, and the mutes lifted.

    Events the mutes dismissed stay dismissed (and marked muted): only later events
    of these kinds arrive open.
    """

    case: CaseOut
    unmuted: list[LiftedMuteOut]


# ------------------------------------------------------------------ audit


class AuditOut(_Out):
    """Who did what to whom, and when."""

    id: int
    at: datetime
    actor: str
    action: str
    target_type: str | None
    target_id: str | None
    details: dict[str, Any] | None


class AuditPage(BaseModel):
    """One page of the audit log, newest first."""

    items: list[AuditOut]
    next_before: int | None = Field(
        description="Pass as 'before' to get the next page; null on the last."
    )


# ------------------------------------------------------------------- keys


class KeyIn(_In):
    """A new operator key."""

    name: Name = Field(description="Whose key it is; shown in the audit log.")
    role: Role


class KeyOut(_Out):
    """An operator key (never its secret)."""

    id: str
    name: str
    role: Role
    prefix: str = Field(description="First characters of the secret, to tell keys apart.")
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyList(BaseModel):
    """Every operator key, oldest first: an object like the other listings, not paged (few)."""

    items: list[KeyOut]


class CreatedKeyOut(KeyOut):
    """A new key with its secret, shown this once."""

    secret: str = Field(description="Send as 'Authorization: Bearer <secret>'. Not shown again.")


# ----------------------------------------------------------------- health


class HealthOut(BaseModel):
    """Liveness or readiness."""

    status: Literal["ok", "unavailable"]
    detail: str | None = None
