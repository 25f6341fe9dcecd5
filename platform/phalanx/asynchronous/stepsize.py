"""The step size of a buffered asynchronous update, scaled for the staleness of its inputs.

An update computed on model version ``v`` and applied when the model is at version
``v + tau`` is ``tau`` versions stale. Its step is the server optimiser's learning
rate times :func:`step_scale` of ``tau``:

- ``delay_adaptive`` (the default) is the delay-adaptive step size of asynchronous
  SGD in Mishchenko, Bach, Even and Woodworth, "Asynchronous SGD Beats Minibatch SGD
  Under Arbitrary Delays" (NeurIPS 2022), as the authors' code applies it:
  ``lr * n / max(n, tau)``, i.e. ``min(1, n / tau)``, with ``n`` the number of
  workers. An update no staler than the threshold takes the full step; a staler one
  a step shrinking as ``1 / tau``, so a few very stale updates cost little and the
  guarantees depend on the number of workers (Koloskova, Stich and Jaggi, NeurIPS
  2022, show the same shape of rule gives rates in the *average* delay, not the
  maximum). The paper counts delay in single-gradient steps; a buffered server moves
  one version per ``buffer_size`` updates, so the threshold in versions is
  ``workers / buffer_size`` (:func:`default_threshold`) unless the config sets one.
- ``polynomial``: ``(1 + tau) ** -a``, FedAsync's polynomial staleness weight and,
  with ``a = 0.5``, FedBuff's.
- ``constant``: 1, plain FedBuff without staleness weighting.

A buffer's updates have their own staleness each; the aggregate of the buffer is
applied with the *mean* of their scales (:func:`buffer_scale`). For the mean rule this
is exactly the average of the updates each scaled by its own step (with one update
per buffer, exactly the paper's rule); a robust rule's aggregate is not a linear
combination of its inputs, so it is scaled as a whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from phalanx.asynchronous.config import StepSizeRule


def default_threshold(num_workers: int, buffer_size: int) -> float:
    """Return the delay-adaptive threshold in model versions: ``num_workers / buffer_size``.

    The paper's full step holds up to ``n`` (the workers) single-update steps of delay;
    a buffered model moves one version per ``buffer_size`` updates.
    """
    if num_workers < 1 or buffer_size < 1:
        raise ValueError(
            f"num_workers and buffer_size must be >= 1, got {num_workers} and {buffer_size}"
        )
    return num_workers / buffer_size


def step_scale(
    rule: StepSizeRule, staleness: int, *, threshold: float = 1.0, exponent: float = 0.5
) -> float:
    """Return the factor on the learning rate for an update ``staleness`` versions old.

    Parameters
    ----------
    rule : {"delay_adaptive", "polynomial", "constant"}
        See the module's docstring.
    staleness : int
        Versions between the model the update was computed on and the current one.
    threshold : float
        ``delay_adaptive``: staleness up to which the full step is taken (> 0).
    exponent : float
        ``polynomial``: the exponent ``a`` of ``(1 + staleness) ** -a`` (>= 0).

    Returns
    -------
    float
        In ``(0, 1]``, and 1 for a fresh update (staleness 0).
    """
    if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
        raise ValueError(f"staleness must be an int >= 0, got {staleness!r}")
    if rule == "constant":
        return 1.0
    if rule == "delay_adaptive":
        if not (math.isfinite(threshold) and threshold > 0):
            raise ValueError(f"threshold must be finite and > 0, got {threshold!r}")
        return 1.0 if staleness <= threshold else threshold / staleness
    if rule == "polynomial":
        if not (math.isfinite(exponent) and exponent >= 0):
            raise ValueError(f"exponent must be finite and >= 0, got {exponent!r}")
        return float((1.0 + staleness) ** -exponent)
    raise ValueError(
        f"unknown step-size rule {rule!r}; choose delay_adaptive, polynomial or constant"
    )


def buffer_scale(
    rule: StepSizeRule,
    stalenesses: Iterable[int],
    *,
    threshold: float = 1.0,
    exponent: float = 0.5,
) -> float:
    """Return the factor on the learning rate for a buffer: the mean of its updates' scales.

    Raises
    ------
    ValueError
        When the buffer is empty: there is nothing to step with.
    """
    scales = [step_scale(rule, s, threshold=threshold, exponent=exponent) for s in stalenesses]
    if not scales:
        raise ValueError("an empty buffer has no step")
    return sum(scales) / len(scales)
