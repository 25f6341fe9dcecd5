"""Outlier scores, the only (weak) evidence when every file has a single replica (r = 1)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

DEFAULT_OUTLIER_THRESHOLD = 8.0
"""Robust z-score above which an r = 1 update counts as an outlier.

Iglewicz and Hoaglin's 3.5 assumes normal scores, but an honest update's distance
score follows its gradient norm, whose tail is heavy: at 3.5 one honest update in 30
to 35 was flagged in runs without any attack (Fashion-MNIST, 15 workers, 20 to 30
rounds; MLP and CNN), at 8 one in 450 or none, while the reversed gradient, IPM and
the constant attack scored far above 8 and were flagged in every round. Updates
between the honest spread and this cut-off still meet the robust rule.
"""

_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation


def outlier_scores(values: Tensor, f: int) -> Tensor:
    """Robust z-scores of a Krum-style distance score, for updates that have no replica.

    Each update's raw score is its mean L2 distance to its ``n - f - 2`` nearest other
    updates: Krum's neighbourhood (an update amid the honest crowd has close neighbours,
    one far from it has none), but plain rather than squared distances, whose right-skewed
    spread would push honest updates in the tail past a z-score threshold. Raw scores are
    then centred on their median and divided by ``1.4826 * MAD`` (the standard deviation,
    for normal data), so a score counts robust standard deviations beyond the typical
    update; a few extreme updates move neither the median nor the MAD.

    Parameters
    ----------
    values : Tensor
        Shape ``(n, d)``, one update per row.
    f : int
        Number of Byzantine updates to tolerate; needs ``n >= f + 3``. With colluding
        adversaries that send near-identical updates, pass at least their number, or
        they count one another as close neighbours.

    Returns
    -------
    Tensor
        Shape ``(n,)``, float64; large positive means far from the others.
    """
    n = values.shape[0]
    if values.ndim != 2:
        raise ValueError(f"outlier_scores needs a (n, d) tensor, got shape {tuple(values.shape)}")
    if f < 0 or n < f + 3:
        raise ValueError(f"outlier_scores needs 0 <= f and n >= f + 3, got n={n}, f={f}")
    v = values.to(torch.float64)
    distances = torch.cdist(v, v)
    distances.fill_diagonal_(math.inf)
    raw = distances.topk(n - f - 2, dim=1, largest=False).values.mean(dim=1)
    median = torch.quantile(raw, 0.5)
    deviation = (raw - median).abs()
    scale = _MAD_TO_SIGMA * float(torch.quantile(deviation, 0.5))
    if scale == 0.0:
        # More than half the scores coincide. Iglewicz and Hoaglin then scale by the mean
        # absolute deviation (1.2533 times it estimates sigma for normal data).
        scale = 1.2533 * float(deviation.mean())
    if scale == 0.0:
        return torch.zeros_like(raw)
    return (raw - median) / scale
