"""The reference crowd of simulated adversaries on local data: honest clients' own updates.

On local data (``data.mode = "local"``) no two clients hold the same samples, so an
omniscient attack (ALIE, IPM, mimic) cannot see "the honest updates of the round's
files"; it sees the honest local updates of a round-seeded sample of up to
:data:`REFERENCE_CLIENTS` honest clients instead, each trained on that client's own
part of the run's partition, less its local test split, with the settings and seed
that client uses (:func:`phalanx_clients.local_updates.compute_local_update`), so
each row is that client's update to the bit. The sample leaves the adversaries out
and depends on the run's seed and the round alone: every adversary of the round
sees the same stack, as colluders would share it.

The red team knows every client's data by definition (it is the simulation's
omniscient adversary): :class:`LocalCrowd` derives the partition from the run
config, as every simulated client does (:func:`phalanx.local_data.run_partition`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.data_mode import ModelShape
from phalanx.finite import all_finite
from phalanx.local_data import client_data, run_partition
from phalanx.local_evaluation import client_split
from phalanx.partitions import Partition
from phalanx.training import derive_seed
from phalanx_clients.local_updates import compute_local_update, local_model

REFERENCE_CLIENTS = 8
"""Most honest clients whose local updates make a round's reference crowd."""

REFERENCE_DRAW = -1
"""The ``file`` of :func:`~phalanx.training.derive_seed` reserved for the round's sample."""


def reference_clients(
    num_workers: int, adversaries: Collection[int], run_seed: int, round: int
) -> tuple[int, ...]:
    """Return the honest clients whose updates make round ``round``'s reference crowd.

    A sample of ``min(REFERENCE_CLIENTS, honest)`` of the workers outside
    ``adversaries``, drawn by a generator seeded by the run and the round, sorted.

    Raises
    ------
    ValueError
        When no worker is honest.
    """
    liars = set(adversaries)
    honest = [w for w in range(num_workers) if w not in liars]
    if not honest:
        raise ValueError(f"every one of the {num_workers} workers is an adversary: no crowd")
    g = torch.Generator().manual_seed(derive_seed(run_seed, round, REFERENCE_DRAW))
    picked = torch.randperm(len(honest), generator=g)[: min(REFERENCE_CLIENTS, len(honest))]
    return tuple(sorted(honest[int(i)] for i in picked))


@dataclass(frozen=True)
class LocalCrowd:
    """Every simulated client's own data in a local-data run, as the red team knows it.

    Parameters
    ----------
    config : RunConfig
        The run (``data.mode = "local"``).
    train_set : ImageDataset
        The run's training split, which the partition divides.
    partition : Partition
        The run's partition of it (:func:`phalanx.local_data.run_partition`).
    """

    config: RunConfig
    train_set: ImageDataset
    partition: Partition

    @classmethod
    def of(cls, config: RunConfig, train_set: ImageDataset) -> LocalCrowd:
        """Derive the run's partition of ``train_set`` as every simulated client does."""
        return cls(config, train_set, run_partition(config, train_set)[0])

    def training_data(self, worker: int) -> ImageDataset:
        """Return what honest client ``worker`` trains on: its part less its test split."""
        own = client_data(self.train_set, self.partition, worker)
        return client_split(
            own, self.config.data.local, run_seed=self.config.seed, worker=worker
        ).train

    def reference_updates(
        self,
        assignment: Assignment,
        adversaries: Collection[int],
        round: int,
        params: Tensor,
        shape: ModelShape,
    ) -> Tensor:
        """Return the ``(m, d)`` stack of round ``round``'s reference crowd from ``params``.

        Row ``i`` is the honest local update of the ``i``-th of
        :func:`reference_clients`, seeded by the file ``assignment`` gives it in the
        round, as its own task does. A row that is not finite (training that diverged,
        which the honest client would not send) is left out.

        Raises
        ------
        ValueError
            When no row is left.
        """
        config = self.config
        clients = reference_clients(assignment.num_workers, adversaries, config.seed, round)
        model = local_model(config, shape)
        rows = []
        for c in clients:
            (file,) = assignment.files_of(c)
            update = compute_local_update(
                config, model, self.training_data(c), round, file, params
            ).update
            if all_finite(update):
                rows.append(update)
        if not rows:
            raise ValueError(
                f"no honest client of the reference crowd {list(clients)} of round {round} "
                "trained to a finite update"
            )
        return torch.stack(rows)
