"""A coordinator transport over Flower's ``Grid`` (simulation engine or SuperLink)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from flwr.app import Message
from flwr.serverapp import Grid

from phalanx.channel import Downlink
from phalanx.coordinator import Exchange
from phalanx.flower.records import MESSAGE_TYPE, MalformedRecordError, read_reply, task_content
from phalanx.redaction import redact_host_paths
from phalanx.replies import Rejection, Reply, Task


class GridTransport:
    """Pushes one message per task and pulls replies until all arrived or time runs out.

    Parameters
    ----------
    grid : Grid
        Flower's grid of the running ServerApp.
    node_of_worker : Mapping[int, int]
        Worker index -> Flower node id.
    run_config_json : str
        The run configuration, sent with every task.
    timeout : float
        Seconds to wait for the replies of one round; late replies are dropped.
    """

    def __init__(
        self,
        grid: Grid,
        node_of_worker: Mapping[int, int],
        run_config_json: str,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.02,
    ) -> None:
        self.grid = grid
        self.node_of_worker = dict(node_of_worker)
        self.run_config_json = run_config_json
        self.timeout = timeout
        self.poll_interval = poll_interval

    def exchange(self, tasks: Sequence[Task], downlink: Downlink) -> Exchange:
        """Send every task with the downlink and collect the replies."""
        messages = []
        bytes_down = 0
        for task in tasks:
            content = task_content(task, downlink, self.run_config_json)
            bytes_down += downlink.num_bytes + len(self.run_config_json)
            messages.append(
                Message(
                    content=content,
                    dst_node_id=self.node_of_worker[task.worker],
                    message_type=MESSAGE_TYPE,
                    group_id=str(task.round),
                )
            )
        sent = list(self.grid.push_messages(messages))
        worker_of_message = {mid: task.worker for mid, task in zip(sent, tasks, strict=True) if mid}
        replies: list[Reply] = []
        malformed: list[Rejection] = []
        pending = set(worker_of_message)
        deadline = time.monotonic() + self.timeout
        while pending and time.monotonic() < deadline:
            for message in self.grid.pull_messages(list(pending)):
                mid = message.metadata.reply_to_message_id
                if mid not in pending:
                    continue
                pending.discard(mid)
                worker = worker_of_message[mid]
                if message.has_error():
                    reason = f"worker error: {redact_host_paths(message.error.reason or '')}"
                    malformed.append(Rejection(worker, "malformed_reply", reason))
                    continue
                try:
                    replies.append(read_reply(message.content, worker=worker))
                except MalformedRecordError as exc:
                    malformed.append(Rejection(worker, "malformed_reply", str(exc)))
            if pending:
                time.sleep(self.poll_interval)
        return Exchange(replies=replies, bytes_down=bytes_down, malformed=malformed)
