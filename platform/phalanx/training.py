"""The one function that turns a model and a file's samples into an update.

Honest workers, tests and benchmarks all call :func:`compute_update`, so
honest replicas of a file agree bit for bit on one software and hardware
stack (same torch build, same thread count).

Sign convention
---------------
An update ``u`` is a descent direction to be *subtracted*: the server applies
``params -= lr_server * aggregated`` (see :func:`apply_update_`).

- ``local_steps == 1``: ``u`` is the gradient of the mean cross-entropy over
  the file, so the server step is plain (distributed) SGD with step
  ``lr_server``.
- ``local_steps == H > 1``: ``u = params_before - params_after`` for ``H``
  local SGD steps with step ``lr`` -- that is, ``lr`` times the sum of the
  local gradients. ``lr_server = 1`` then moves the model to the (robustly)
  averaged local model, as in FedAvg / local SGD; other values scale the step.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn
from torch.nn import functional

from phalanx.data import ImageDataset
from phalanx.nets import flatten_params, load_flat_

_SEED_DOMAIN = b"phalanx.training.derive_seed.v1"


def derive_seed(run_seed: int, round: int, file: int) -> int:
    """Derive the seed of one file's update in one round, stable across processes and platforms.

    The first 8 bytes of ``SHA-256(domain, run_seed, round, file)`` over the
    decimal text of the three integers, shifted to 63 bits so that it suits
    ``torch.Generator.manual_seed`` and NumPy. Any integers are accepted, so a
    caller may reserve a negative ``file`` (e.g. ``-1``) for a per-round draw
    that belongs to no file; distinct triples give independent seeds.

    Parameters
    ----------
    run_seed, round, file : int
        The run's seed, the round number, the file index.

    Returns
    -------
    int
        In ``0 .. 2**63 - 1``.
    """
    message = _SEED_DOMAIN + f":{run_seed}:{round}:{file}".encode("ascii")
    return int.from_bytes(hashlib.sha256(message).digest()[:8], "big") >> 1


def compute_update(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    seed: int,
    local_steps: int = 1,
    lr: float = 0.05,
    batch_size: int | None = None,
) -> Tensor:
    """Compute one file's update: a gradient, or a local-SGD delta.

    A pure function: ``model``'s parameters and buffers are never written
    (the work runs on detached views through :func:`torch.func.functional_call`,
    buffers on copies), its training flags are set for the call and restored,
    and torch's global random state is restored afterwards. Every random
    choice, including dropout if a model had it, comes from ``seed``. Two calls
    with equal inputs return bit-identical results on the same torch build and
    thread count. Not for concurrent calls on one model from several threads:
    ``functional_call`` swaps the parameters in for the call.

    Parameters
    ----------
    model : nn.Module
        The global model, in its current state.
    x : Tensor
        The file's inputs, float32, ``(n, ...)``.
    y : Tensor
        The file's labels, int64, ``(n,)``.
    seed : int
        Seed for this file and round, e.g. from :func:`derive_seed`.
    local_steps : int
        ``1``: return the gradient of the mean cross-entropy over all of
        ``(x, y)``. ``H > 1``: run ``H`` SGD steps with step ``lr`` and return
        ``params_before - params_after`` (see the module's sign convention).
    lr : float
        Local step size; used only when ``local_steps > 1``.
    batch_size : int, optional
        Minibatch size of the local steps; each step draws ``batch_size``
        distinct samples with ``torch.randperm`` from a generator seeded with
        ``seed``. ``None`` uses the whole file at every step. Only valid with
        ``local_steps > 1``.

    Returns
    -------
    Tensor
        1-D float32, ``num_params(model)`` long, in ``parameters()`` order.
    """
    n = _check_inputs(x, y)
    if local_steps < 1:
        raise ValueError(f"local_steps must be >= 1, got {local_steps}")
    if local_steps == 1 and batch_size is not None:
        raise ValueError(
            "batch_size applies to local SGD (local_steps > 1); with local_steps=1 the update "
            "is the gradient over the whole file, so pass batch_size=None"
        )
    if batch_size is not None and not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in 1..{n} (the file size), got {batch_size}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr}")

    names = [name for name, _ in model.named_parameters()]
    before = [p.detach() for p in model.parameters()]
    # Buffers on copies: a module that updates them in training mode (batch norm's
    # running statistics) must not change the caller's model.
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    with torch.random.fork_rng(devices=[]), _training(model):
        # The CPU generator alone: torch.manual_seed also queues seeding of every
        # accelerator backend, with a stack trace per call, which costs more than a
        # small file's gradient.
        torch.default_generator.manual_seed(seed)
        if local_steps == 1:
            return _flat(_gradients(model, names, before, buffers, x, y))
        weights = before
        sampler = torch.Generator().manual_seed(seed)
        for _ in range(local_steps):
            if batch_size is None:
                xb, yb = x, y
            else:
                chosen = torch.randperm(n, generator=sampler)[:batch_size]
                xb, yb = x[chosen], y[chosen]
            grads = _gradients(model, names, weights, buffers, xb, yb)
            weights = [w - lr * g for w, g in zip(weights, grads, strict=True)]
        return _flat(before) - _flat(weights)


def apply_update_(model: nn.Module, update: Tensor, lr: float) -> nn.Module:
    """Apply the server step ``params -= lr * update`` in place and return ``model``."""
    return load_flat_(model, flatten_params(model) - lr * update.to(torch.float32))


def evaluate(
    model: nn.Module, dataset: ImageDataset, *, batch_size: int = 1000
) -> tuple[float, float]:
    """Measure the mean cross-entropy and the accuracy of ``model`` on ``dataset``.

    Runs under ``torch.no_grad`` in eval mode; the model's training mode is
    restored afterwards.

    Returns
    -------
    tuple of float
        ``(mean_loss, accuracy)``, accuracy in ``[0, 1]``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(dataset), batch_size):
                xb = dataset.x[start : start + batch_size]
                yb = dataset.y[start : start + batch_size]
                logits = model(xb)
                total_loss += float(functional.cross_entropy(logits, yb, reduction="sum"))
                correct += int((logits.argmax(dim=1) == yb).sum())
    finally:
        model.train(was_training)
    return total_loss / len(dataset), correct / len(dataset)


def _check_inputs(x: Tensor, y: Tensor) -> int:
    if not x.is_floating_point() or x.dim() < 2:
        raise ValueError(f"x must be floating point (n, ...), got {x.dtype} {tuple(x.shape)}")
    if y.dtype != torch.int64 or y.dim() != 1:
        raise ValueError(f"y must be int64 (n,), got {y.dtype} {tuple(y.shape)}")
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(
            f"x and y must hold the same non-zero number of samples, got {x.shape[0]} "
            f"and {y.shape[0]}"
        )
    return int(x.shape[0])


@contextmanager
def _training(model: nn.Module) -> Iterator[None]:
    """Put every submodule in training mode for the block, then restore each one's flag."""
    modes = [(m, m.training) for m in model.modules()]
    model.train()
    try:
        yield
    finally:
        for module, mode in modes:
            module.training = mode


def _gradients(
    model: nn.Module,
    names: list[str],
    weights: list[Tensor],
    buffers: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
) -> list[Tensor]:
    """Gradients of the mean cross-entropy of ``model`` run with ``weights`` (zeros if unused)."""
    leaves = [w.detach().requires_grad_(True) for w in weights]
    state = {**dict(zip(names, leaves, strict=True)), **buffers}
    loss = functional.cross_entropy(torch.func.functional_call(model, state, (x,)), y)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [
        (torch.zeros_like(w) if g is None else g).to(torch.float32)
        for w, g in zip(leaves, grads, strict=True)
    ]


def _flat(tensors: list[Tensor]) -> Tensor:
    return torch.cat([t.reshape(-1).to(torch.float32) for t in tensors])
