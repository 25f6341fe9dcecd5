"""Collection policies: when a round stops waiting for replies, and what it keeps.

A round's arrivals are :class:`~phalanx.collect.pieces.Piece` s (worker, file,
arrival time, digest). A policy is a close rule over them
(:mod:`~phalanx.collect.waiting`: ``all``, ``deadline``, ``fastest_k``,
``adaptive_k``, ``bandit``; :mod:`~phalanx.collect.quorum`: ``quorum``,
``group_fastest``), named in :data:`~phalanx.collect.registry.CLOSE_RULES` and
applied by :func:`~phalanx.collect.registry.collect`, which returns a
:class:`~phalanx.collect.pieces.Collection`: kept, late and missing pieces,
none lost. The policies with memory keep it in explicit state: adaptive k-sync
(:mod:`~phalanx.collect.adaptive`), G-CADA's lazy groups
(:mod:`~phalanx.collect.groups`) and the worker-choosing bandit
(:mod:`~phalanx.collect.bandit`). The setting is
:class:`~phalanx.collect.config.CollectConfig`.
"""

from phalanx.collect.adaptive import AdaptiveK, advance_k, grow_k
from phalanx.collect.bandit import BanditState, ResponseTimeBandit, observe_times, select_workers
from phalanx.collect.config import CollectConfig, PolicyName
from phalanx.collect.groups import lazy_groups, next_staleness
from phalanx.collect.pieces import Collection, Piece
from phalanx.collect.quorum import fastest_replica_close, file_close_times, quorum_close
from phalanx.collect.registry import CLOSE_RULES, CollectionPolicy, close_time, collect
from phalanx.collect.waiting import completion_times, everyone_arrived, kth_complete

__all__ = [
    "CLOSE_RULES",
    "AdaptiveK",
    "BanditState",
    "CollectConfig",
    "Collection",
    "CollectionPolicy",
    "Piece",
    "PolicyName",
    "ResponseTimeBandit",
    "advance_k",
    "close_time",
    "collect",
    "completion_times",
    "everyone_arrived",
    "fastest_replica_close",
    "file_close_times",
    "grow_k",
    "kth_complete",
    "lazy_groups",
    "next_staleness",
    "observe_times",
    "quorum_close",
    "select_workers",
]
