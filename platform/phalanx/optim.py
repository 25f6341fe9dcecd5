"""The server optimiser: applies the aggregated update to the global model."""

from __future__ import annotations

import copy
import importlib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, Literal

import torch
from torch import Tensor

from phalanx.finite import all_finite

OptimizerName = Literal["sgd", "adam", "amsgrad"]


def prepare_in_background() -> threading.Thread:
    """Import what torch's first optimiser imports (``torch._dynamo``) in a daemon thread.

    A federation that waits for its nodes calls it, so that the import overlaps the
    wait and round 1's exchange instead of following them (see
    :attr:`ServerOptimizer.optimizer`). Importing twice is harmless: Python's import
    lock makes the second wait for the first.
    """
    thread = threading.Thread(
        target=importlib.import_module, args=("torch._dynamo",), daemon=True, name="torch-optim"
    )
    thread.start()
    return thread


class ServerOptimizer:
    """SGD with momentum, Adam or AMSGrad over the flat global parameter vector.

    The aggregated update plays the role of the gradient: ``step(update)`` moves
    the parameters against it.
    """

    def __init__(
        self, params: Tensor, *, kind: OptimizerName, lr: float, momentum: float = 0.9
    ) -> None:
        if kind not in ("sgd", "adam", "amsgrad"):
            raise ValueError(f"unknown optimizer {kind!r}; choose sgd, adam or amsgrad")
        self.param = torch.nn.Parameter(params.detach().clone().to(torch.float32))
        self.kind, self.lr, self.momentum = kind, lr, momentum

    @cached_property
    def optimizer(self) -> torch.optim.Optimizer:
        """The torch optimiser, built when first used.

        Torch imports ``torch._dynamo`` when a process builds its first optimiser: 3 s
        on an idle core, 10 s on a loaded one, which held a run's first tasks back
        while its coordinator was built (1,000 Flower nodes). Built here, it comes after
        round 1's tasks went out; :func:`prepare_in_background` imports it meanwhile.
        """
        if self.kind == "sgd":
            return torch.optim.SGD([self.param], lr=self.lr, momentum=self.momentum)
        return torch.optim.Adam([self.param], lr=self.lr, amsgrad=self.kind == "amsgrad")

    @property
    def params(self) -> Tensor:
        """The current global parameters (a detached view)."""
        return self.param.detach()

    def step(self, update: Tensor) -> None:
        """Apply one aggregated update."""
        if update.shape != self.param.shape:
            raise ValueError(f"update has shape {tuple(update.shape)}, model {self.param.shape}")
        self.param.grad = update.detach().to(torch.float32).clone()
        self.optimizer.step()
        self.param.grad = None

    @contextmanager
    def scaled_lr(self, factor: float) -> Iterator[None]:
        """Within the block, step with the learning rate times ``factor``.

        The learning rate in force when the block began comes back when it ends (also
        in any state saved and restored within it), so a checkpoint never holds the
        scaled one. Asynchronous mode's staleness-scaled step size uses it: scaling the
        update instead would do nothing under Adam, which normalises it away.
        """
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"a learning-rate factor must be finite and > 0, got {factor!r}")
        groups = self.optimizer.param_groups
        base = [group["lr"] for group in groups]
        for group, lr in zip(groups, base, strict=True):
            group["lr"] = lr * factor
        try:
            yield
        finally:
            for group, lr in zip(self.optimizer.param_groups, base, strict=True):
                group["lr"] = lr

    def step_if_finite(self, update: Tensor) -> bool:
        """Apply ``update`` unless the parameters or the optimiser's state would overflow.

        A finite update can still overflow: Adam squares it. When the step would leave
        any parameter or state value non-finite, nothing changes.

        Returns
        -------
        bool
            Whether the step was applied.
        """
        saved = self._snapshot()
        self.step(update)
        if self._finite():
            return True
        self._restore(saved)
        return False

    def stays_finite(self, update: Tensor) -> bool:
        """Whether :meth:`step_if_finite` would apply ``update``; changes nothing."""
        saved = self._snapshot()
        self.step(update)
        finite = self._finite()
        self._restore(saved)
        return finite

    def _snapshot(self) -> tuple[Tensor, dict[str, Any]]:
        return self.params.clone(), copy.deepcopy(self.optimizer.state_dict())

    def _restore(self, saved: tuple[Tensor, dict[str, Any]]) -> None:
        params, state = saved
        self.set_params(params)
        self.optimizer.load_state_dict(state)

    def _finite(self) -> bool:
        tensors = [self.param.detach()]
        for state in self.optimizer.state.values():
            tensors.extend(
                v for v in state.values() if isinstance(v, Tensor) and v.is_floating_point()
            )
        return all(all_finite(t) for t in tensors)

    def set_params(self, params: Tensor) -> None:
        """Overwrite the parameters (e.g. with the codec's reconstruction), keeping the state."""
        with torch.no_grad():
            self.param.copy_(params)

    def state_dict(self) -> dict[str, Any]:
        """Return the parameters and optimiser state, for a checkpoint."""
        return {"params": self.params.clone(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.set_params(state["params"])
        self.optimizer.load_state_dict(state["optimizer"])
