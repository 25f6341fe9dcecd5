"""Federated evaluation as Flower messages (``message_type = "evaluate"``), both directions.

The task carries the run config, the worker, the run's model shape and the full
global weights (float32): evaluation never touches the worker's model replica
that training's compressed downlink keeps in step. The report carries what the
worker measured; its values are read as they are and judged by the coordinator
(:func:`phalanx.federated_evaluation.judge_report`), so a report of NaN, an
accuracy of 7 or a count of ``10**30`` arrives as such and is refused there.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from torch import Tensor

from phalanx.data_mode import ModelShape
from phalanx.federated_evaluation import EvaluationReport, EvaluationTask
from phalanx.flower.records import MalformedRecordError

EVALUATE_TYPE = "evaluate"
EVAL_TASK = "evaluate"
EVAL_MODEL = "model"
EVALUATION = "evaluation"
WEIGHTS = "weights"

T = TypeVar("T")


def evaluation_task_content(
    task: EvaluationTask, weights: Tensor, run_config_json: str
) -> RecordDict:
    """Build the content of an evaluation message: the task, the run config, the weights."""
    record = ConfigRecord(
        {
            "run_id": task.run_id,
            "round": task.round,
            "nonce": task.nonce,
            "worker": task.worker,
            "model_shape": task.model_shape.as_list(),
            "run_config": run_config_json,
        }
    )
    array = Array(np.array(weights.detach().to("cpu").numpy(), dtype=np.float32, order="C"))
    return RecordDict({EVAL_TASK: record, EVAL_MODEL: ArrayRecord(array_dict={WEIGHTS: array})})


def read_evaluation_task(content: RecordDict) -> tuple[EvaluationTask, np.ndarray[Any, Any], str]:
    """Parse an evaluation message (the worker side): the task, the weights, the run config.

    Raises
    ------
    MalformedRecordError
        When a field is missing or of the wrong type.
    """
    try:
        record = content.config_records[EVAL_TASK]
        shape = record["model_shape"]
        if not isinstance(shape, list) or len(shape) != 3:
            raise MalformedRecordError("field 'model_shape' does not hold three ints")
        task = EvaluationTask(
            run_id=_typed(record, "run_id", str),
            round=_typed(record, "round", int),
            nonce=_typed(record, "nonce", str),
            worker=_typed(record, "worker", int),
            model_shape=ModelShape(*shape),
        )
        weights = content.array_records[EVAL_MODEL][WEIGHTS].numpy()
        return task, weights, _typed(record, "run_config", str)
    except MalformedRecordError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedRecordError(f"evaluation message is malformed: {exc}") from exc


def evaluation_content(loss: float, accuracy: float, num_samples: int) -> RecordDict:
    """Build a worker's evaluation report."""
    return RecordDict(
        {
            EVALUATION: ConfigRecord(
                {"loss": float(loss), "accuracy": float(accuracy), "num_samples": num_samples}
            )
        }
    )


def read_evaluation(content: RecordDict, *, worker: int) -> EvaluationReport:
    """Read worker ``worker``'s report; its values unchecked (the coordinator judges them).

    Raises
    ------
    MalformedRecordError
        When the message holds no evaluation record.
    """
    record = content.config_records.get(EVALUATION)
    if record is None:
        raise MalformedRecordError("the reply holds no evaluation record")
    return EvaluationReport(
        worker=worker,
        loss=record.get("loss"),
        accuracy=record.get("accuracy"),
        num_samples=record.get("num_samples"),
    )


def _typed(record: ConfigRecord, key: str, kind: type[T]) -> T:
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MalformedRecordError(f"field {key!r} is not {kind.__name__}")
    return value
