from __future__ import annotations

from phalanx.event_kinds import (
    EVALUATION_KINDS,
    FAULT_KINDS,
    FLAG_KINDS,
    REJECTION_KINDS,
    ROUND_KINDS,
    EventKind,
    bans_on_confirm,
)


def test_every_kind_is_in_exactly_one_family() -> None:
    families = [FLAG_KINDS, REJECTION_KINDS, FAULT_KINDS, ROUND_KINDS, EVALUATION_KINDS]
    for kind in EventKind:
        assert sum(kind in family for family in families) == 1, kind


def test_flags_and_rejections_may_ban_but_faults_and_unknown_kinds_never_do() -> None:
    assert bans_on_confirm("outside_max_clique")
    assert bans_on_confirm(EventKind.BAD_SIGNATURE)
    assert bans_on_confirm(EventKind.OVERFLOW)
    assert not bans_on_confirm(EventKind.WORKER_ERROR)
    assert not bans_on_confirm(EventKind.UNCHECKED_REPLY)
    assert not bans_on_confirm(EventKind.TIED_GROUPS)
    assert not bans_on_confirm(EventKind.IMPLAUSIBLE_EVALUATION)
    assert bans_on_confirm(EventKind.DISPUTES_ACROSS_ROUNDS)
    assert not bans_on_confirm("a_kind_from_a_newer_version")
