"""Where a heterogeneity run's NNM differs from ByzFL's, how near a tie the neighbour choice was.

NNM replaces each update by the mean of its ``n - f`` nearest updates. When one
update's ``(n - f)``-th and ``(n - f + 1)``-th nearest neighbours lie at nearly
the same distance, float32 rounding may order them either way, and two correct
implementations mix that update with different last neighbours. This runs one
case of ``eval_heterogeneity.py`` (current code, in process, the committed grid's
settings: the MLP's, or the CNN's with ``--model cnn``) and, in each round
whose aggregate differs from ByzFL's by more than ``--gap``, prints the closest
call: the update whose two boundary neighbours lie nearest (relative margin, in
float64, parts per million) and how far float32 ``cdist`` strays from float64 on
that round's updates. A margin below that error is a tie to float32.

Example (the largest gap of the committed grid)::

    python benchmarks/nnm_ties.py dirichlet-0.1 median ipm 2 --seed 2026
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.eval_heterogeneity import stored_settings
from benchmarks.lib.heterogeneity_grid import IN_PROCESS, PARTITIONS, SEED, grid
from benchmarks.lib.heterogeneity_runs import run_case
from benchmarks.lib.results import RESULTS, read_json


def closest_call(updates: Tensor, f: int) -> tuple[int, float, float]:
    """The update nearest a tie at NNM's boundary, its margin, and float32's distance error.

    Returns
    -------
    tuple of (int, float, float)
        The row, the relative gap between its ``(n - f)``-th and ``(n - f + 1)``-th
        nearest distances (float64, parts per million), and the largest relative
        error of float32 ``cdist`` against float64 over all pairs (parts per million).
    """
    exact = torch.cdist(updates.double(), updates.double())
    k = updates.shape[0] - f
    ordered, _ = exact.sort(dim=1)
    margin = (ordered[:, k] - ordered[:, k - 1]) / ordered[:, k]
    row = int(margin.argmin())
    single = torch.cdist(updates.float(), updates.float()).double()
    off = exact > 0
    error = float(((single - exact).abs()[off] / exact[off]).max())
    return row, 1e6 * float(margin[row]), 1e6 * error


def report(threshold: float) -> Callable[[float, Tensor, int], None]:
    """A round's gap to ByzFL: past ``threshold``, print the round's closest call."""
    rounds = 0

    def on_gap(gap: float, updates: Tensor, f: int) -> None:
        nonlocal rounds
        rounds += 1
        if gap > threshold:
            row, margin, error = closest_call(updates.detach(), f)
            print(
                f"round {rounds}: gap {gap:.4f}, n = {updates.shape[0]}, f = {f}; update "
                f"{row}: boundary neighbours {margin:.2f} ppm apart; float32 cdist off by "
                f"up to {error:.1f} ppm",
                flush=True,
            )

    return on_gap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    by_label = {p.label: p for p in PARTITIONS}
    parser.add_argument("partition", choices=sorted(by_label))
    parser.add_argument("rule", help="the rule after NNM, e.g. median")
    parser.add_argument("attack", help="alie, ipm, sign_flip or label_flip")
    parser.add_argument("q", type=int, help="adversaries (at least 1)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--model", choices=("mlp", "cnn"), default="mlp", help="whose committed settings to use"
    )
    parser.add_argument("--gap", type=float, default=1e-3, help="relative gap worth examining")
    args = parser.parse_args(argv)
    if args.q < 1:
        raise SystemExit("q: give at least one adversary (the grid's attacked cells)")
    partition = by_label[args.partition]
    cases = grid([partition], (args.rule,), ("nnm",), (args.attack,), (args.q,), (args.seed,))
    (case,) = [c for c in cases if c.q == args.q]
    name = "heterogeneity" if args.model == "mlp" else f"heterogeneity_{args.model}"
    settings = stored_settings(read_json(RESULTS / f"{name}.json"))
    row = run_case(case, settings, IN_PROCESS, report(args.gap))
    print(f"largest gap {row.byzfl_gap}; final accuracy {row.final_accuracy}; error {row.error}")
    return 0 if row.error is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
