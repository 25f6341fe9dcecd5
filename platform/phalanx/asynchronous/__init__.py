"""Buffered asynchronous aggregation at r = 1 (FedBuff-like), its pure decisions.

Workers compute on the model version they were given and reply when they finish;
every ``buffer_size`` usable arrivals the coordinator applies the robust aggregate of
the buffer with a step scaled for the buffer's staleness (:mod:`.stepsize`), and
refuses updates older than the staleness bound (:mod:`.staleness`); a worker that
finished pulls the newest model and starts again. Arrivals are events on the systems
model's virtual clock (:mod:`.jobs`). The setting is
:class:`~phalanx.asynchronous.config.AsynchronousConfig`; the loop that drives it
over a transport is :mod:`phalanx.async_coordinator`.

This package imports no torch: the run config reads its section.
"""

from phalanx.asynchronous.config import AsynchronousConfig, StepSizeRule
from phalanx.asynchronous.jobs import Job, JobQueue
from phalanx.asynchronous.staleness import StalenessSummary, is_too_stale, staleness
from phalanx.asynchronous.stepsize import buffer_scale, default_threshold, step_scale

__all__ = [
    "AsynchronousConfig",
    "Job",
    "JobQueue",
    "StalenessSummary",
    "StepSizeRule",
    "buffer_scale",
    "default_threshold",
    "is_too_stale",
    "staleness",
    "step_scale",
]
