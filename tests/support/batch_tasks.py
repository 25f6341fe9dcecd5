"""A batch the records tests build and read: three tasks of one round and one downlink."""

from __future__ import annotations

import numpy as np

from phalanx.channel import Downlink
from phalanx.data_mode import ModelShape
from phalanx.replies import Task

DOWNLINK = Downlink(
    kind="delta",
    target="t" * 64,
    weights=np.arange(6, dtype=np.float32),
    history={"layer.0": np.ones(3, dtype=np.float32)},
    delta=b"\x01\x02",
    base="b" * 64,
)
"""A delta downlink with weights and a history array: every field a task message carries."""

TASKS = [
    Task("run", 4, "nonce", 0, (3, 8), samples=((1, 2), (5,))),
    Task("run", 4, "nonce", 9, (1,), samples=((7, 7, 0),), budget_s=2.5),
    Task("run", 4, "nonce", 17, (2,), model_shape=ModelShape(1, 8, 10)),
]
"""Assigned data with samples, with a compute budget, and local data with a model shape."""
