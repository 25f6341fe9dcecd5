"""The peers ``bench_aggregation.py`` times beside ``phalanx.aggregation``: Flower 1.42 and ByzFL.

Flower's strategies aggregate reply ``Message`` objects, as a ServerApp gets
them; ByzFL's aggregator classes are loaded without running ``byzfl/__init__``,
which imports torchvision (it cannot be imported beside the CPU torch here).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import Any

import torch


def load_byzfl() -> dict[str, Any]:
    """ByzFL's aggregator and pre-aggregator classes, without running ``byzfl/__init__``."""
    spec = importlib.util.find_spec("byzfl")  # locating a top-level package runs nothing
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("byzfl is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, folder in (
        ("byzfl", root),
        ("byzfl.utils", root / "utils"),
        ("byzfl.aggregators", root / "aggregators"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package

    def load(name: str, path: Path) -> types.ModuleType:
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)
        return module

    load("byzfl.utils.torch_tools", root / "utils" / "torch_tools.py")
    load("byzfl.utils.misc", root / "utils" / "misc.py")
    aggregators = load("byzfl.aggregators.aggregators", root / "aggregators" / "aggregators.py")
    pre = load("byzfl.aggregators.preaggregators", root / "aggregators" / "preaggregators.py")
    return {**vars(aggregators), **vars(pre)}


def flower_setup() -> dict[str, Any]:
    """Flower's strategies and what a reply needs, as a ServerApp process has them."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.serverapp import strategy
    from flwr.supercore.task_identity import TaskIdentity

    # A ServerApp's runtime sets these before any Message is built.
    TaskIdentity.run_id = 1
    TaskIdentity.node_id = 0
    TaskIdentity.task_id = 1
    logging.getLogger("flwr").setLevel(logging.WARNING)  # one INFO line per call otherwise
    return {
        "strategy": strategy,
        "ArrayRecord": ArrayRecord,
        "Message": Message,
        "MetricRecord": MetricRecord,
        "RecordDict": RecordDict,
    }


def flower_replies(fl: dict[str, Any], x: torch.Tensor) -> list[Any]:
    """One reply Message per row: an ArrayRecord and ``num-examples = 1``."""
    replies = []
    for i, row in enumerate(x.numpy()):
        instruction = fl["Message"](fl["RecordDict"](), dst_node_id=i + 1, message_type="train")
        content = fl["RecordDict"](
            {
                "arrays": fl["ArrayRecord"]([row]),
                "metrics": fl["MetricRecord"]({"num-examples": 1}),
            }
        )
        replies.append(fl["Message"](content, reply_to=instruction))
    return replies
