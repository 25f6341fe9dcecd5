"""The plain Flower FedAvg app that ``bench_round.py`` times beside Phalanx.

A ``ClientApp`` that trains the global model on its file of the round with
Phalanx's own ``compute_update``, and a ``ServerApp`` running Flower's
``FedAvg`` with server-side evaluation every round. They live in an importable
module so that Ray's workers unpickle the ClientApp by reference: its dataset
cache is then the module's, loaded once per worker process.
"""

from __future__ import annotations

import logging
import os
import time
from functools import lru_cache
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.nets import build_model, flatten_params, init_model, load_flat_
from phalanx.plan import file_samples
from phalanx.training import compute_update, derive_seed, evaluate


@lru_cache(maxsize=2)
def _train_set(name: str) -> ImageDataset:
    """The training set, loaded once per ClientApp process (as Phalanx's ClientApp does)."""
    return load_dataset(name, "train")


@lru_cache(maxsize=2)
def _round_files(config_json: str, num_train: int, round_: int) -> list[torch.Tensor]:
    """The round's files, drawn once per process and round.

    Phalanx's coordinator draws them once per round and each task carries its own, so
    the plain app does no plan work per task either.
    """
    config = RunConfig.model_validate_json(config_json)
    return file_samples(config, num_train, round_, config.assignment.num_workers)


def fedavg_client_app(config: RunConfig) -> ClientApp:
    """A ClientApp that trains the global model on its file of the round, like Phalanx's."""
    app = ClientApp()
    config_json = config.model_dump_json()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        worker = context.node_config["partition-id"]
        round_ = message.content.config_records["config"]["server-round"]
        if not isinstance(worker, int) or not isinstance(round_, int):
            raise TypeError("expected an int partition-id and server-round")
        train_set = _train_set(config.data.dataset)
        model = build_model(
            config.data.model,
            in_channels=train_set.in_channels,
            image_size=train_set.image_size,
            num_classes=train_set.num_classes,
        )
        model.load_state_dict(message.content.array_records["arrays"].to_torch_state_dict())
        idx = _round_files(config_json, len(train_set.y), round_)[worker]
        delta = compute_update(
            model,
            train_set.x[idx],
            train_set.y[idx],
            seed=derive_seed(config.seed, round_, worker),
            local_steps=config.training.local_steps,
            lr=config.training.local_lr,
        )
        load_flat_(model, flatten_params(model) - delta)
        content = RecordDict(
            {
                "arrays": ArrayRecord(model.state_dict()),
                "metrics": MetricRecord({"num-examples": len(idx)}),
            }
        )
        return Message(content=content, reply_to=message)

    return app


def fedavg_server_app(
    config: RunConfig, ends: list[float], evals: list[float], accuracy: list[float]
) -> ServerApp:
    """A ServerApp running Flower's FedAvg with server-side evaluation every round."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        test_set = load_dataset(config.data.dataset, "test")
        model = init_model(
            config.data.model,
            in_channels=test_set.in_channels,
            image_size=test_set.image_size,
            num_classes=test_set.num_classes,
            seed=config.seed,
        )
        k = config.assignment.num_workers
        n = config.data.eval_samples or len(test_set.y)
        head = ImageDataset(
            x=test_set.x[:n], y=test_set.y[:n], num_classes=test_set.num_classes, name="head"
        )

        def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            started = time.perf_counter()
            model.load_state_dict(arrays.to_torch_state_dict())
            final = server_round == config.rounds
            loss, acc = evaluate(model, test_set if final else head)
            if server_round > 0:
                ends.append(time.perf_counter())
                evals.append(ends[-1] - started)
                accuracy.append(acc)
            return MetricRecord({"loss": loss, "accuracy": acc})

        strategy = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=0.0,
            min_train_nodes=k,
            min_available_nodes=k,
        )
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(model.state_dict()),
            num_rounds=config.rounds,
            train_config=ConfigRecord(),
            evaluate_fn=evaluate_fn,
        )

    return app


def backend_config() -> dict[str, Any]:
    """The Ray settings Phalanx's simulation uses (one CPU per ClientApp instance).

    ``address="local"`` starts a Ray of its own rather than joining the cluster that a
    stale ``/tmp/ray/ray_current_cluster`` names, as ``phalanx.flower.simulation`` does.
    """
    return {
        "client_resources": {"num_cpus": 1.0, "num_gpus": 0.0},
        "init_args": {
            "logging_level": logging.WARNING,
            "log_to_driver": False,
            "address": "local",
            "num_cpus": os.cpu_count() or 1,
        },
    }
