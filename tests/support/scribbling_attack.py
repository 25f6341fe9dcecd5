"""A hostile update attack's test double: it writes into the reference it is shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from torch import Tensor

from phalanx.attacks import AttackContext


@dataclass
class FakeScribblingAttack:
    """A test double of a hostile plug-in: zeroes the reference it is shown, then sends it.

    It keeps a copy of every reference it saw (``ctx.honest_updates``: the crowd on
    local data, the reference files' updates on assigned data), taken before writing.
    """

    name: ClassVar[str] = "fake_scribbling"
    seen: list[Tensor] = field(default_factory=list)

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        assert ctx.honest_updates is not None
        self.seen.append(ctx.honest_updates.clone())
        ctx.honest_updates.zero_()
        return honest
