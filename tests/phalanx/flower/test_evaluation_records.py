"""Federated evaluation as Flower records: tasks out, reports back, read as sent."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, RecordDict

from phalanx.data_mode import ModelShape
from phalanx.federated_evaluation import EvaluationTask
from phalanx.flower.evaluation_records import (
    EVAL_TASK,
    EVALUATION,
    evaluation_content,
    evaluation_task_content,
    read_evaluation,
    read_evaluation_task,
)
from phalanx.flower.records import MalformedRecordError

TASK = EvaluationTask("run", 3, "n0nce", 5, ModelShape(1, 8, 10))


def test_a_task_and_its_weights_round_trip() -> None:
    weights = torch.linspace(-1, 1, 17)

    task, read, config = read_evaluation_task(evaluation_task_content(TASK, weights, "{}"))

    assert (task, config) == (TASK, "{}")
    assert np.array_equal(read, weights.numpy()) and read.dtype == np.float32


def test_a_report_round_trips_and_its_sender_is_the_worker_it_was_asked_of() -> None:
    report = read_evaluation(evaluation_content(0.25, 0.75, 40), worker=5)
    assert (report.worker, report.loss, report.accuracy, report.num_samples) == (5, 0.25, 0.75, 40)


def test_hostile_values_arrive_as_sent_for_the_coordinator_to_judge() -> None:
    content = RecordDict(
        {EVALUATION: ConfigRecord({"loss": math.nan, "accuracy": 7.0, "num_samples": -3})}
    )
    report = read_evaluation(content, worker=1)
    assert math.isnan(report.loss)  # type: ignore[arg-type]
    assert (report.accuracy, report.num_samples) == (7.0, -3)


def test_a_reply_without_a_report_or_a_task_with_a_bad_field_is_malformed() -> None:
    with pytest.raises(MalformedRecordError, match="no evaluation record"):
        read_evaluation(RecordDict({}), worker=1)
    content = evaluation_task_content(TASK, torch.zeros(3), "{}")
    content.config_records[EVAL_TASK]["model_shape"] = [1, 8]
    with pytest.raises(MalformedRecordError, match="three ints"):
        read_evaluation_task(content)
    content = evaluation_task_content(TASK, torch.zeros(3), "{}")
    content.config_records[EVAL_TASK]["round"] = "3"
    with pytest.raises(MalformedRecordError, match="'round' is not int"):
        read_evaluation_task(content)
    content = evaluation_task_content(TASK, torch.zeros(3), "{}")
    content.config_records[EVAL_TASK]["model_shape"] = [1, 8, 0]
    with pytest.raises(MalformedRecordError, match="malformed"):
        read_evaluation_task(content)
