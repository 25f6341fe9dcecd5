from __future__ import annotations

from phalanx.agreeing_group import AgreeingGroup, membership_digest


def test_the_digest_is_of_the_members_not_of_their_order_or_repeats() -> None:
    assert AgreeingGroup.of([3, 1, 2, 2]) == AgreeingGroup.of((1, 2, 3))
    assert AgreeingGroup.of([1, 2, 3]).digest == membership_digest([1, 2, 3])
    assert AgreeingGroup.of([1, 2, 3]) != AgreeingGroup.of([1, 2, 4])
    assert AgreeingGroup.of([12, 3]).digest != AgreeingGroup.of([1, 23]).digest
    group = AgreeingGroup.of(range(5))
    assert AgreeingGroup.from_dict(group.to_dict()) == group
    for bad in (None, [], {"count": True, "digest": group.digest}, {"count": 5, "digest": "AB"}):
        assert AgreeingGroup.from_dict(bad) is None
