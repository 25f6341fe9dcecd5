"""What ``bench_aggregation.py`` times: the inputs, one :class:`Case` per implementation and rule.

The same ``(n, d)`` stack goes to every implementation: Gaussian honest rows,
the last ``f`` reversed and scaled by 100, with ``f`` the largest every rule accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np
import torch

from benchmarks.lib.aggregation_peers import flower_replies
from phalanx import aggregation as agg
from phalanx.config import AggregationConfig, PreRule

SEED = 2024
BUCKET_SIZE = 2
IMPLS = ("phalanx", "flower", "byzfl")
# The names the run config accepts for aggregation.rule and aggregation.pre.
AGGREGATORS = (*get_args(AggregationConfig.model_fields["rule"].annotation), *get_args(PreRule))


def byzantine_count(n: int) -> int:
    """The largest ``f`` that every rule accepts (Bulyan needs ``n >= 4 f + 3``)."""
    return (n - 3) // 4


def make_updates(n: int, d: int, seed: int = SEED) -> torch.Tensor:
    """Gaussian honest updates; the last ``f`` rows are reversed and scaled by 100."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + n * 10_007 + d)
    x = torch.randn(n, d, generator=generator)
    f = byzantine_count(n)
    x[n - f :] *= -100.0
    return x


@dataclass
class Case:
    """One implementation of one rule: ``prepare`` runs untimed, ``run`` is timed."""

    aggregator: str
    impl: str
    prepare: Callable[[], Any]
    run: Callable[[Any], Any]
    as_numpy: Callable[[Any], np.ndarray[Any, Any]]
    comparable: bool = True  # same definition as phalanx's, so outputs should agree
    reference: Callable[[], np.ndarray[Any, Any]] | None = None  # the rule in float64


@dataclass
class Skip:
    """A peer rule left out, and why."""

    aggregator: str
    impl: str
    n: int
    d: int
    reason: str


def tensor_numpy(out: Any) -> np.ndarray[Any, Any]:
    return np.asarray(out.detach().numpy(), dtype=np.float64)


def build_cases(
    x: torch.Tensor,
    impls: Sequence[str],
    aggregators: Sequence[str],
    byzfl: dict[str, Any] | None,
    fl: dict[str, Any] | None,
    nnm_limit_bytes: float,
    skips: list[Skip] | None = None,
) -> list[Case]:
    n, d = x.shape
    f = byzantine_count(n)
    cases: list[Case] = []

    def add(aggregator: str, impl: str, *args: Any, **kwargs: Any) -> None:
        if impl in impls and aggregator in aggregators:
            cases.append(Case(aggregator, impl, *args, **kwargs))

    def same(value: Any = None) -> Callable[[], Any]:
        return lambda: x if value is None else value

    # phalanx
    phalanx_calls: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "mean": lambda u: agg.mean(u, f=f),
        "median": lambda u: agg.coordinate_median(u, f=f),
        "trimmed_mean": lambda u: agg.trimmed_mean(u, f=f),
        "geometric_median": lambda u: agg.geometric_median(u, f=f, nu=0.1, max_iter=3, eps=0.0),
        "krum": lambda u: agg.krum(u, f=f),
        "multi_krum": lambda u: agg.multi_krum(u, f=f),
        "bulyan": lambda u: agg.bulyan(u, f=f),
        "centered_clipping": lambda u: agg.centered_clipping(u, f=f, tau=100.0, n_iter=1),
        "median_of_means": lambda u: agg.median_of_means(u, f=f),
        "nnm": lambda u: agg.nearest_neighbor_mixing(u, f=f),
        "bucketing": lambda u: agg.bucketing(u, f=f, s=BUCKET_SIZE, seed=SEED),
    }
    for name, call in phalanx_calls.items():
        # The same definition evaluated in float64, to measure every output's rounding error.
        def reference(call: Callable[[torch.Tensor], torch.Tensor] = call) -> Any:
            return tensor_numpy(call(x.double()))

        add(name, "phalanx", same(), call, tensor_numpy, reference=reference)

    # Flower: the strategy's aggregate_train on fresh reply Messages
    if fl is not None:
        s = fl["strategy"]
        strategies: dict[str, Any] = {
            "mean": s.FedAvg(),
            "median": s.FedMedian(),
            # Flower trims int(beta * n) values from each end: beta = (f + 1/4) / n gives f.
            "trimmed_mean": s.FedTrimmedAvg(beta=(f + 0.25) / n),
            "krum": s.Krum(num_malicious_nodes=f),
            "multi_krum": s.MultiKrum(num_malicious_nodes=f, num_nodes_to_select=n - f),
            "bulyan": s.Bulyan(num_malicious_nodes=f),
        }
        for name, strat in strategies.items():
            add(
                name,
                "flower",
                lambda: flower_replies(fl, x),
                lambda replies, strat=strat: strat.aggregate_train(1, replies)[0],
                lambda out: np.asarray(out.to_numpy_ndarrays()[0], dtype=np.float64),
                # Flower's Bulyan picks its rows by one-shot Multi-Krum, not Krum by Krum.
                comparable=name != "bulyan",
            )

    # ByzFL: the aggregator objects on the same tensor
    if byzfl is not None:
        b = byzfl
        objects: dict[str, Any] = {
            "mean": b["Average"](),
            "median": b["Median"](),
            "trimmed_mean": b["TrMean"](f=f),
            "geometric_median": b["GeometricMedian"](nu=0.1, T=3),
            "krum": b["Krum"](f=f),
            "multi_krum": b["MultiKrum"](f=f),
            "centered_clipping": b["CenteredClipping"](tau=100.0, L=1),
            "nnm": b["NNM"](f=f),
            "bucketing": b["Bucketing"](s=BUCKET_SIZE),
        }
        nnm_bytes = n * (n - f) * d * 4
        if nnm_bytes > nnm_limit_bytes:
            objects.pop("nnm")
            if skips is not None and "nnm" in aggregators and "byzfl" in impls:
                skips.append(
                    Skip(
                        "nnm",
                        "byzfl",
                        n,
                        d,
                        f"ByzFL's NNM indexes an (n, n - f, d) tensor: "
                        f"{nnm_bytes / 2**30:.1f} GiB, over the --byzfl-nnm-limit-gib",
                    )
                )
        for name, obj in objects.items():
            if name == "centered_clipping":
                # ByzFL's CenteredClipping keeps its last output as the next start; reset it
                # (untimed) so that every call does the same work as Phalanx's, from zero.
                def fresh(obj: Any = obj) -> torch.Tensor:
                    obj.m = None
                    return x

                add(name, "byzfl", fresh, obj, tensor_numpy)
            else:
                add(
                    name,
                    "byzfl",
                    same(),
                    obj,
                    tensor_numpy,
                    # ByzFL's Krum scores n - f - 1 neighbours (Phalanx and Flower: n - f - 2);
                    # its geometric median starts at zero (Phalanx: at the mean); bucketing is
                    # random in both.
                    comparable=name not in ("krum", "geometric_median", "bucketing"),
                )
    return cases
