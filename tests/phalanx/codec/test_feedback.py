from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec import (
    CodecConfig,
    DeltaHistory,
    ErrorFeedback,
    check_codec_compatible,
    encode_update,
)
from tests.support.codec_builders import gradient_like


def test_error_feedback_with_replication_above_one_is_refused():
    with pytest.raises(ValueError, match="replication 1"):
        check_codec_compatible(CodecConfig(error_feedback=True), replication=3)


@pytest.mark.parametrize(("error_feedback", "replication"), [(True, 1), (False, 1), (False, 3)])
def test_compatible_settings_pass(error_feedback, replication):
    check_codec_compatible(CodecConfig(error_feedback=error_feedback), replication=replication)


def test_error_feedback_is_off_by_default():
    assert CodecConfig().error_feedback is False


def test_encoding_through_error_feedback_needs_it_enabled(layout):
    config = CodecConfig()
    with pytest.raises(ValueError, match="error_feedback=True"):
        ErrorFeedback(layout).encode(
            gradient_like(layout, 1),
            history=DeltaHistory.from_config(layout, config),
            config=config,
            seed_context=(0, 0, 0),
        )


def test_memory_holds_the_last_quantization_error(layout):
    config = CodecConfig(error_feedback=True, rd_lambda=0.3)
    history = DeltaHistory.from_config(layout, config)
    feedback = ErrorFeedback(layout)
    first = gradient_like(layout, 2)
    encoded = feedback.encode(first, history=history, config=config, seed_context=(0, 1, 0))
    np.testing.assert_array_equal(feedback.memory, first - encoded.flat)
    second = gradient_like(layout, 3)
    corrected = second + feedback.memory
    encoded = feedback.encode(second, history=history, config=config, seed_context=(0, 2, 0))
    np.testing.assert_allclose(feedback.memory, corrected - encoded.flat, atol=1e-9)
    feedback.reset()
    assert not feedback.memory.any()


def test_error_feedback_keeps_the_sum_of_what_was_sent_close_to_the_sum_of_updates(layout):
    config = CodecConfig(error_feedback=True, rd_lambda=0.3, ternary=False, censor_threshold=0.0)
    history = DeltaHistory.from_config(layout, config)
    feedback = ErrorFeedback(layout)
    true_sum = np.zeros(layout.total)
    sent_with = np.zeros(layout.total)
    sent_without = np.zeros(layout.total)
    for round_ in range(12):
        update = gradient_like(layout, 100 + round_)
        true_sum += update
        sent_with += feedback.encode(
            update, history=history, config=config, seed_context=(0, round_, 0)
        ).flat
        sent_without += encode_update(
            update, layers_spec=layout, history=history, config=config, seed_context=(0, round_, 0)
        ).flat
    # What is still owed is exactly the memory; without feedback the error accumulates.
    np.testing.assert_allclose(true_sum - sent_with, feedback.memory, atol=1e-5)
    assert np.linalg.norm(true_sum - sent_with) < 0.5 * np.linalg.norm(true_sum - sent_without)
