"""Running a simulated federation: identities, the coordinator and a transport.

Simulations go through Flower's simulation engine; the ClientApp is loaded by
its Flower component reference, the way ``flwr run`` loads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from flwr.clientapp import ClientApp

from phalanx.config import RunConfig
from phalanx.coordinator import Coordinator, Member, Transport
from phalanx.data import load_dataset
from phalanx.nets import flatten_params, init_model
from phalanx.reports import RoundReport, RoundSink
from phalanx.roster import simulated_roster

CLIENT_APP = "phalanx_clients.app:app"


def build_coordinator(
    config: RunConfig,
    run_id: str,
    transport: Transport,
    sink: RoundSink,
    *,
    checkpoint: bytes | None = None,
    members: Mapping[int, Member] | None = None,
) -> Coordinator:
    """Build a coordinator, restored from ``checkpoint`` when given.

    ``members`` are the workers' identities: the simulated roster by default,
    the approved clients in a deployment.
    """
    test_set = load_dataset(config.data.dataset, "test", num_classes=config.data.num_classes)
    model = init_model(
        config.data.model,
        in_channels=int(test_set.x.shape[1]),
        image_size=int(test_set.x.shape[-1]),
        num_classes=test_set.num_classes,
        seed=config.seed,
    )
    if members is None:
        members = {
            ident.worker: Member(ident.worker, ident.client_id, ident.public_key)
            for ident in simulated_roster(run_id, config.assignment.num_workers)
        }
    coordinator = Coordinator(
        config,
        run_id=run_id,
        transport=transport,
        members=members,
        model=model,
        params=flatten_params(model),
        test_set=test_set,
        sink=sink,
    )
    if checkpoint is not None:
        coordinator.restore(checkpoint)
    return coordinator


def load_client_app(reference: str = CLIENT_APP) -> ClientApp:
    """Load a ClientApp by its ``module:attribute`` component reference."""
    module_name, _, attr = reference.partition(":")
    app = getattr(importlib.import_module(module_name), attr)
    if not isinstance(app, ClientApp):
        raise TypeError(f"{reference} is not a flwr ClientApp")
    return app


def execute_run(
    config: RunConfig,
    *,
    run_id: str,
    sink: RoundSink,
    start_round: int = 1,
    checkpoint: bytes | None = None,
    on_round: Callable[[RoundReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    transport: Transport | None = None,
    ray_address: str | None = None,
) -> list[RoundReport]:
    """Run rounds ``start_round ..`` of a simulated run and return their reports.

    With ``transport=None`` the run goes through Flower's simulation engine;
    otherwise the given transport (e.g. the in-process test double) is used.
    """
    reports: list[RoundReport] = []

    def drive(t: Transport) -> None:
        coordinator = build_coordinator(config, run_id, t, sink, checkpoint=checkpoint)
        reports.extend(
            coordinator.run(start_round=start_round, on_round=on_round, should_stop=should_stop)
        )

    if transport is not None:
        drive(transport)
        return reports

    from phalanx.flower.simulation import simulate

    simulate(
        drive,
        load_client_app(),
        num_workers=config.assignment.num_workers,
        run_config_json=config.model_dump_json(),
        ray_address=ray_address,
    )
    return reports
