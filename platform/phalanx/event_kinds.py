"""The kinds of detection event, and what each kind says about the worker it names.

Three families, because an operator must never take one for another:

* **Flags** (:data:`FLAG_KINDS`): detection judged the worker to lie, from comparing
  replicas, scoring updates, or tracing an overflowing aggregate to it.
* **Rejections** (:data:`REJECTION_KINDS`): the worker's reply broke the protocol (a bad
  signature, a stale nonce, an unreadable or non-finite update) and was refused whole.
* **Faults** (:data:`FAULT_KINDS`): the worker did not deliver, and nothing shows it lied:
  its own code or data failed, its data does not fit the run's model (``data_mismatch``,
  local data), or the coordinator could not check what it sent. A fault is never high
  severity and never bans a client when an operator confirms it.

**Evaluation notices** (:data:`EVALUATION_KINDS`): a client's federated evaluation
report could not be true (an accuracy of 7, a NaN loss, a negative count) and was
refused; it changed no model (medium severity; confirming one bans nobody).

Beside them, **round notices** (:data:`ROUND_KINDS`) name no single worker: a round whose
largest agreeing groups tied, or whose largest group left out workers that nothing yet
proves to lie, records those suspects and the files it left out (medium severity;
confirming one bans nobody).
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    """Every kind of detection event the coordinator records.

    The store's ``kind`` column is free text (a new kind needs no migration); these are
    the values the coordinator writes.
    """

    OUTSIDE_MAX_CLIQUE = "outside_max_clique"
    MAJORITY_MINORITY = "majority_minority"
    OUTLIER = "outlier"
    LOW_DEGREE = "low_degree"
    DISPUTES_ACROSS_ROUNDS = "disputes_across_rounds"
    OVERFLOW = "overflow"
    MALFORMED_REPLY = "malformed_reply"
    BAD_SHAPE = "bad_shape"
    NON_FINITE = "non_finite"
    BAD_SIGNATURE = "bad_signature"
    STALE_ROUND = "stale_round"
    WRONG_NONCE = "wrong_nonce"
    UNASSIGNED_FILE = "unassigned_file"
    NODE_ID_MISMATCH = "node_id_mismatch"
    WORKER_ERROR = "worker_error"
    DATA_MISMATCH = "data_mismatch"
    UNCHECKED_REPLY = "unchecked_reply"
    TIED_GROUPS = "tied_groups"
    UNPROVEN_OUTSIDERS = "unproven_outsiders"
    IMPLAUSIBLE_EVALUATION = "implausible_evaluation"


#: Kinds by which detection judges a worker to lie: the worker is flagged.
FLAG_KINDS = frozenset(
    {
        EventKind.OUTSIDE_MAX_CLIQUE,
        EventKind.MAJORITY_MINORITY,
        EventKind.OUTLIER,
        EventKind.LOW_DEGREE,
        EventKind.DISPUTES_ACROSS_ROUNDS,
        EventKind.OVERFLOW,
    }
)

#: Kinds of a reply refused for breaking the protocol.
REJECTION_KINDS = frozenset(
    {
        EventKind.MALFORMED_REPLY,
        EventKind.BAD_SHAPE,
        EventKind.NON_FINITE,
        EventKind.BAD_SIGNATURE,
        EventKind.STALE_ROUND,
        EventKind.WRONG_NONCE,
        EventKind.UNASSIGNED_FILE,
        EventKind.NODE_ID_MISMATCH,
    }
)

#: Kinds of a worker that delivered nothing usable without being shown to lie.
FAULT_KINDS = frozenset(
    {EventKind.WORKER_ERROR, EventKind.DATA_MISMATCH, EventKind.UNCHECKED_REPLY}
)

#: Faults a worker may name for itself when it reports a failure: it can only say which
#: of its own failures it had (the coordinator's ``unchecked_reply`` is not one of them).
WORKER_FAULT_KINDS = frozenset({EventKind.WORKER_ERROR, EventKind.DATA_MISMATCH})

#: Kinds of a federated evaluation report refused as impossible (local data): it changed
#: no model and counted in no aggregate, so it is medium severity and bans nobody.
EVALUATION_KINDS = frozenset({EventKind.IMPLAUSIBLE_EVALUATION})

#: Kinds about a round rather than one worker: detection could not decide, and says so.
ROUND_KINDS = frozenset({EventKind.TIED_GROUPS, EventKind.UNPROVEN_OUTSIDERS})


def bans_on_confirm(kind: str) -> bool:
    """Whether confirming an event of ``kind`` may ban its client.

    Faults never do: a worker whose code or data broke is not an adversary. Kinds this
    version does not know are treated as faults, so an unknown kind never bans anyone.
    """
    return kind in FLAG_KINDS or kind in REJECTION_KINDS
