"""Identical payloads of one exchange, kept once.

Replicas that agree send byte-identical payloads, so at r = 3 a round's replies
hold each honest update three times: at K = 10,000 workers and the Fashion-MNIST
MLP (0.94 MB a float32 update) that is 28 GB where one copy, 9.4 GB, says it all.
A transport passes each reply it collects through its exchange's pool, and replies
with equal payloads then share one ``bytes`` object. Bytes are immutable, so
nothing downstream can tell, and the checks' caches, keyed by the payload, find
the shared object's hash computed already.
"""

from __future__ import annotations

import dataclasses

from phalanx.replies import Reply


class PayloadPool:
    """The payloads seen in one exchange, each distinct value once."""

    def __init__(self) -> None:
        self._kept: dict[bytes, bytes] = {}

    def shared(self, reply: Reply) -> Reply:
        """Return ``reply`` with each payload an equal one seen before replaced by it.

        Anything but ``bytes`` (a reply the checks will refuse) passes unchanged.
        """
        payloads = tuple(
            self._kept.setdefault(p, p) if type(p) is bytes else p for p in reply.payloads
        )
        if all(a is b for a, b in zip(payloads, reply.payloads, strict=True)):
            return reply
        return dataclasses.replace(reply, payloads=payloads)
