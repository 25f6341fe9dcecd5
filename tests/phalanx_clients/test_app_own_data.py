"""A deployed client's ClientApp on a local-data task: its own node's data and nothing else.

The real ``enrolled_app`` handler answers a task message as a SuperNode would hand it over,
with a node config. The client reads the file its node config names (``data-path``); the
run config the coordinator sends names another file, which does not even exist, and is
never opened. A node naming no data, or a file that is not there, replies a fault of its
own setup (``worker_error``); a file the run's model does not take, ``data_mismatch``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict

from phalanx.channel import make_channel
from phalanx.config import RunConfig
from phalanx.data_mode import ModelShape
from phalanx.federated_evaluation import EvaluationTask
from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.evaluation_records import (
    EVAL_MODEL,
    EVAL_TASK,
    EVALUATE_TYPE,
    EVALUATION,
    WEIGHTS,
    evaluation_task_content,
    read_evaluation,
)
from phalanx.flower.records import MESSAGE_TYPE, read_fault, read_reply, task_content
from phalanx.identity import generate_private_key, save_private_key
from phalanx.local_evaluation import split_sizes
from phalanx.nets import build_model, flatten_params, layer_shapes
from phalanx.replies import Task
from phalanx_clients.app import EnrolledWorker, build_client_app
from tests.support.fake_grid import server_task_identity

NODE = 2**63 + 7
SHAPE = ModelShape(in_channels=1, image_size=8, num_classes=10)


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def _config(dataset: str) -> RunConfig:
    return RunConfig.model_validate(
        {
            "seed": 4,
            "rounds": 1,
            "data": {
                "dataset": dataset,
                "model": "mlp",
                "mode": "local",
                "local": {"steps": 2, "batch_size": 8},
            },
            "assignment": {"scheme": "none", "num_workers": 3, "r": 1},
            "aggregation": {"rule": "mean"},
            "deployment": {"backend": "deployment"},
        }
    )


def _own_file(path: Path, size: int, *, side: int = 8, top_label: int = 9) -> Path:
    rng = np.random.default_rng(size)
    images = rng.random((size, side, side), dtype=np.float32)
    np.savez(path, x_train=images, y_train=np.arange(size, dtype=np.int64) % (top_label + 1))
    return path


def _node_config(tmp_path: Path, **settings: Any) -> dict[str, str]:
    key_path = tmp_path / "client.key"
    save_private_key(key_path, generate_private_key())
    identity = NodeIdentity("client-7", key_path, **settings)
    config = {"phalanx-client-id": identity.client_id, "phalanx-key": str(identity.key_path)}
    if identity.data_path:
        config["data-path"] = identity.data_path
    if identity.byzantine:
        config["phalanx-byzantine"] = identity.byzantine
    return config


def _answer(config: RunConfig, node_config: dict[str, str]) -> RecordDict:
    """Hand the enrolled ClientApp worker 1's task of round 1; return its reply's content."""
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    params = flatten_params(model)
    downlink = make_channel(config.codec, layer_shapes(model), params, config.seed).downlink()
    task = Task(run_id="r", round=1, nonce="n", worker=1, files=(1,), model_shape=SHAPE)
    message = Message(
        content=task_content(task, downlink, config.model_dump_json()),
        dst_node_id=NODE,
        message_type=MESSAGE_TYPE,
    )
    context = Context(
        run_id=1, node_id=NODE, node_config=node_config, state=RecordDict(), run_config={}
    )
    app = build_client_app(EnrolledWorker(environ={}))
    return app(message=message, context=context).content


def test_the_client_trains_on_its_data_path_and_never_opens_the_file_the_run_names(
    tmp_path: Path,
) -> None:
    own = _own_file(tmp_path / "own.npz", 37)
    named_by_the_coordinator = tmp_path / "elsewhere" / "secret.npz"  # does not exist

    content = _answer(
        _config(f"npz:{named_by_the_coordinator}"), _node_config(tmp_path, data_path=str(own))
    )

    assert read_fault(content) is None
    reply = read_reply(content, worker=1)
    trained, _ = split_sizes(37, 0.2)  # a fifth held out to evaluate on
    assert (reply.num_samples, reply.files, reply.node_id) == (trained, (1,), NODE)


def test_the_client_evaluates_on_the_held_out_part_of_its_data_path(tmp_path: Path) -> None:
    own = _own_file(tmp_path / "own.npz", 37)
    config = _config(f"npz:{tmp_path / 'elsewhere' / 'secret.npz'}")
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    task = EvaluationTask(run_id="r", round=1, nonce="n", worker=1, model_shape=SHAPE)
    message = Message(
        content=evaluation_task_content(task, flatten_params(model), config.model_dump_json()),
        dst_node_id=NODE,
        message_type=EVALUATE_TYPE,
    )
    node_config = _node_config(tmp_path, data_path=str(own))
    context = Context(
        run_id=1, node_id=NODE, node_config=node_config, state=RecordDict(), run_config={}
    )

    content = build_client_app(EnrolledWorker(environ={}))(message=message, context=context).content

    assert read_fault(content) is None
    report = read_evaluation(content, worker=1)
    assert report.num_samples == split_sizes(37, 0.2)[1]
    assert 0.0 <= float(report.accuracy) <= 1.0  # type: ignore[arg-type]


def test_a_bare_npz_path_is_read_as_an_archive(tmp_path: Path) -> None:
    own = _own_file(tmp_path / "mine.npz", 12)

    content = _answer(_config("digits"), _node_config(tmp_path, data_path=str(own)))

    assert read_reply(content, worker=1).num_samples == split_sizes(12, 0.2)[0]


@pytest.mark.parametrize(
    ("data_path", "expected"),
    [
        (None, "this node names none: set data-path in the SuperNode's --node-config"),
        ("npz:{tmp}/gone.npz", "this node's data-path names no data"),
        ("{tmp}/no-such-dir", "this node's data-path names no data"),
        ("npz:{tmp}/not-an-archive.npz", "this node's data-path cannot be read"),
        ("npz:../../etc/shadow.npz", "this node's data-path cannot be read"),
    ],
)
def test_a_node_whose_data_is_missing_or_unreadable_replies_a_fault_of_its_setup(
    tmp_path: Path, data_path: str | None, expected: str
) -> None:
    (tmp_path / "not-an-archive.npz").write_text("hello")
    path = None if data_path is None else data_path.format(tmp=tmp_path)

    fault = read_fault(_answer(_config("digits"), _node_config(tmp_path, data_path=path)))

    assert fault is not None
    kind, cause = fault
    assert kind == "worker_error"
    assert expected in cause, cause


@pytest.mark.parametrize(
    ("side", "top_label", "expected"),
    [
        (28, 9, "holds 1x28x28 images; the run's model takes 1x8x8"),
        (8, 11, "has labels up to 11; the run's model has 10 classes"),
    ],
)
def test_data_the_model_does_not_take_is_a_data_mismatch_fault(
    tmp_path: Path, side: int, top_label: int, expected: str
) -> None:
    own = _own_file(tmp_path / "own.npz", 24, side=side, top_label=top_label)

    fault = read_fault(_answer(_config("digits"), _node_config(tmp_path, data_path=str(own))))

    assert fault is not None
    assert fault[0] == "data_mismatch"
    assert expected in fault[1], fault


def test_the_byzantine_switch_is_refused_in_words_on_local_data(tmp_path: Path) -> None:
    own = _own_file(tmp_path / "own.npz", 20)
    node_config = _node_config(tmp_path, data_path=str(own), byzantine="reversed_gradient")

    fault = read_fault(_answer(_config("digits"), node_config))

    assert fault is not None
    assert fault[0] == "worker_error"
    assert "not available with local data" in fault[1], fault


def _weights(values: np.ndarray[Any, Any]) -> Callable[[RecordDict], None]:
    def put(content: RecordDict) -> None:
        content.array_records[EVAL_MODEL] = ArrayRecord({WEIGHTS: Array(values)})

    return put


def _field(key: str, value: Any) -> Callable[[RecordDict], None]:
    def put(content: RecordDict) -> None:
        content.config_records[EVAL_TASK][key] = value

    return put


def _no_weights(content: RecordDict) -> None:
    del content.array_records[EVAL_MODEL]


_SIZE = 50_826  # the 1x8x8 MLP's parameters


@pytest.mark.parametrize(
    ("hostile", "kind", "cause"),
    [
        (_field("round", "1"), "worker_error", "field 'round' is not int"),
        (_field("model_shape", ["1", "8", "10"]), "worker_error", "in_channels must be"),
        (_field("model_shape", [1, 3000, 10]), "data_mismatch", "takes 1x3000x3000"),
        (_field("model_shape", [1, 8, 50_000_000]), "data_mismatch", "more than any run may"),
        (_field("run_config", "{not json"), "worker_error", "ValidationError"),
        (_no_weights, "worker_error", "malformed"),
        (_weights(np.zeros(5, np.float32)), "worker_error", "params has 5 values"),
        (_weights(np.zeros((1, _SIZE), np.float32)), "worker_error", "1-D floating-point"),
        (_weights(np.full(_SIZE, np.nan, np.float32)), "worker_error", "NaN or Inf"),
        (_weights(np.zeros(_SIZE, np.complex64)), "worker_error", "1-D floating-point"),
    ],
)
def test_a_hostile_evaluation_message_gets_a_fault_reply_never_a_crash_or_a_report(
    tmp_path: Path, hostile: Callable[[RecordDict], None], kind: str, cause: str
) -> None:
    # Red team: wrong types, a model shape the data or any run cannot take, a run
    # config that is not JSON, weights missing, short, stacked, NaN or complex.
    own = _own_file(tmp_path / "own.npz", 37)
    config = _config(f"npz:{tmp_path / 'elsewhere' / 'secret.npz'}")
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10)
    assert flatten_params(model).numel() == _SIZE
    task = EvaluationTask(run_id="r", round=1, nonce="n", worker=1, model_shape=SHAPE)
    content = evaluation_task_content(task, flatten_params(model), config.model_dump_json())
    hostile(content)
    message = Message(content=content, dst_node_id=NODE, message_type=EVALUATE_TYPE)
    node_config = _node_config(tmp_path, data_path=str(own))
    context = Context(
        run_id=1, node_id=NODE, node_config=node_config, state=RecordDict(), run_config={}
    )

    reply = build_client_app(EnrolledWorker(environ={}))(message=message, context=context)

    fault = read_fault(reply.content)
    assert fault is not None and fault[0] == kind, fault
    assert cause in fault[1], fault
    assert EVALUATION not in reply.content.config_records
