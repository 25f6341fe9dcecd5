"""The run configuration: one pydantic model, from the CLI, a file or the API alike."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from phalanx.assignment import count_files
from phalanx.asynchronous.config import AsynchronousConfig
from phalanx.attack_plugins import installed_attacks, is_reference
from phalanx.breakdown import Rule, min_inputs, rule_inputs
from phalanx.codec.config import CODEC_ONLY, CodecConfig
from phalanx.collect.config import CollectConfig
from phalanx.data_checks import MAX_CLASSES
from phalanx.data_files import KNOWN_NUM_CLASSES
from phalanx.data_mode import DataMode, LocalTrainingConfig
from phalanx.partitions.config import PartitionConfig
from phalanx.strict_numbers import NumbersNotBooleans
from phalanx.systems.config import SystemsConfig

Scheme = Literal["none", "groups", "subsets", "bibd", "mols", "random"]
PreRule = Literal["nnm", "bucketing"]
ATTACK_NAMES = (
    "reversed_gradient",
    "constant",
    "sign_flip",
    "gaussian",
    "alie",
    "ipm",
    "mimic",
    "label_flip",
)
MAX_WORKERS = 10_000
"""Most workers a run may have, from the CLI and the API alike."""
MAX_NUM_FILES = 100_000
"""Most files per round a random-scheme run may ask for."""
DATASET_NAMES = ("fashion-mnist", "digits")
"""The built-in datasets; others are named ``idx:DIR`` or ``npz:PATH``."""


class _Section(NumbersNotBooleans):
    # TOML spells inf and nan; a run config never holds them (JSON would carry them as null).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DataConfig(_Section):
    """What is learned, from which data."""

    dataset: str = Field(
        default="fashion-mnist",
        max_length=4096,
        description='"fashion-mnist", "digits", "idx:DIR" or "npz:PATH". Through the API, '
        "DIR and PATH must lie inside the server's datasets directory (PHALANX_DATASETS_DIR) "
        "and a relative one is relative to it.",
    )
    num_classes: int | None = Field(
        default=None,
        ge=2,
        le=MAX_CLASSES,
        description="Classes of the model; null: 10 for fashion-mnist and digits, else inferred "
        "as max label + 1 when every label 0..max occurs in the training split.",
    )
    model: Literal["cnn", "mlp"] = "cnn"
    samples_per_file: int = Field(default=32, ge=1, le=100_000)
    eval_samples: int | None = Field(
        default=2000, ge=1, description="Test samples evaluated each round; None means all."
    )
    mode: DataMode = Field(
        default="assigned",
        description="assigned: the coordinator assigns every worker its samples of one shared "
        "dataset (redundant assignment); local: every client trains on its own data, r = 1 "
        "(phalanx.data_mode).",
    )
    partition: PartitionConfig | None = Field(
        default=None,
        description="mode = 'local' in simulation: how the training split is divided among "
        "the clients (null: iid).",
    )
    local: LocalTrainingConfig | None = Field(
        default=None,
        description="mode = 'local': how each client trains in a round (null: the defaults, "
        "one epoch of SGD).",
    )

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, name: str) -> str:
        prefix, _, path = name.partition(":")
        if name in DATASET_NAMES or (prefix in ("idx", "npz") and path and "\x00" not in path):
            return name
        raise ValueError(
            f"unknown dataset {name!r}; use 'fashion-mnist', 'digits', 'idx:DIR' or 'npz:PATH'"
        )

    @model_validator(mode="after")
    def _settings_of_the_mode(self) -> DataConfig:
        if self.mode == "assigned":
            given = [n for n in ("partition", "local") if getattr(self, n) is not None]
            if given:
                verb = "applies" if len(given) == 1 else "apply"
                raise ValueError(
                    f"data.{' and data.'.join(given)} {verb} to data.mode = 'local' only (each "
                    "client training on its own data); set data.mode = 'local' or leave "
                    f"{'it' if len(given) == 1 else 'them'} out"
                )
            return self
        # Compared with the default, not with the fields set: a config dumped with its
        # defaults (stored with the run, sent to every client) must validate again.
        if self.samples_per_file != type(self).model_fields["samples_per_file"].default:
            raise ValueError(
                "data.samples_per_file sizes the files the coordinator assigns; in "
                "data.mode = 'local' each client trains on its own data "
                "(data.local.batch_size sets its minibatch)"
            )
        classes = self.num_classes or KNOWN_NUM_CLASSES.get(self.dataset)
        wanted = self.partition.labels_per_client if self.partition else None
        if classes is not None and wanted is not None and wanted > classes:
            raise ValueError(
                f"data.partition.labels_per_client={wanted} exceeds the {classes} classes of "
                f"{self.dataset!r}"
            )
        return self


class AssignmentConfig(_Section):
    """Who computes which file (docs/architecture.md, section 2)."""

    scheme: Scheme = "bibd"
    num_workers: int = Field(default=15, ge=1, le=MAX_WORKERS)
    r: int = Field(default=3, ge=1, le=64)
    num_files: int | None = Field(
        default=None, ge=1, le=MAX_NUM_FILES, description="Only for the random scheme."
    )
    relabel: StrictBool = Field(default=True, description="Relabel workers at random every round.")


class DetectionConfig(_Section):
    """How replicas are compared and liars flagged."""

    mode: Literal["exact", "tolerance", "auto"] = "auto"
    tolerance: float = Field(default=1e-5, gt=0.0, lt=1.0)
    exclude_flagged_for: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="Rounds a flagged worker gets no work after being flagged (0: none).",
    )
    on_tie: Literal["drop_disputed", "majority"] = Field(
        default="drop_disputed",
        description="When largest agreeing groups tie: drop disputed files, or trust the "
        "per-file majority (Aspis, ByzShield).",
    )
    across_rounds: StrictBool = Field(
        default=True,
        description="Flag a worker once its disputes across the run's rounds prove it lies "
        "(phalanx.detection.disputes); benched like any flag (exclude_flagged_for).",
    )
    max_adversaries: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="The most workers assumed to lie, for the proof across rounds (null: "
        "fewer than half the workers). A tighter bound proves colluders sooner.",
    )
    outlier_threshold: float | None = Field(
        default=8.0,  # phalanx.detection.DEFAULT_OUTLIER_THRESHOLD (the config imports no torch)
        gt=0.0,
        description="Robust z-score above which an r = 1 update is flagged (null: never).",
    )
    outlier_ratio: float | None = Field(
        default=None,
        ge=1.0,
        le=1e6,
        description="How many times the typical distance to the median update a flagged "
        "r = 1 update must also lie (null: 2 on assigned data, 5 on local data, whose "
        "clients' updates differ more).",
    )

    def ratio_for(self, data_mode: str) -> float:
        """Return the outlier ratio in force on ``data_mode``'s data (set, or its default).

        The defaults are :data:`phalanx.detection.DEFAULT_OUTLIER_RATIO` and
        :data:`~phalanx.detection.LOCAL_OUTLIER_RATIO` (the config imports no torch).
        """
        if self.outlier_ratio is not None:
            return self.outlier_ratio
        return 5.0 if data_mode == "local" else 2.0


_Bounds = tuple[type, float, float, bool]
"""An option's type, lowest and highest value, and whether the lowest is excluded."""

_POSITIVE = float("inf")
RULE_OPTIONS: dict[str, dict[str, _Bounds]] = {
    "mean": {},
    "median": {},
    "trimmed_mean": {},
    "geometric_median": {
        "nu": (float, 0.0, _POSITIVE, True),
        "max_iter": (int, 0, 10_000, False),
        "eps": (float, 0.0, _POSITIVE, False),
    },
    "krum": {},
    "multi_krum": {"m": (int, 1, MAX_NUM_FILES, False)},
    "bulyan": {},
    "centered_clipping": {
        "tau": (float, 0.0, _POSITIVE, True),
        "n_iter": (int, 1, 10_000, False),
    },
    "median_of_means": {"groups": (int, 1, MAX_NUM_FILES, False)},
}
"""Keyword options each rule takes from a run config, with their bounds."""

PRE_OPTIONS: dict[str, dict[str, _Bounds]] = {
    "nnm": {},
    "bucketing": {"s": (int, 1, MAX_NUM_FILES, False), "seed": (int, 0, 2**63 - 1, False)},
}
"""Keyword options each pre-aggregator takes from a run config, with their bounds."""


def _checked_options(
    owner: str, given: Mapping[str, float | int], table: Mapping[str, _Bounds]
) -> dict[str, float | int]:
    """Return ``given`` checked against ``owner``'s options (integral floats made ints)."""
    checked: dict[str, float | int] = {}
    for key, value in given.items():
        if key not in table:
            takes = ", ".join(sorted(table)) or "none"
            raise ValueError(f"{key!r} is not an option of {owner} (it takes {takes})")
        kind, low, high, open_low = table[key]
        if kind is int:
            if not float(value).is_integer():
                raise ValueError(f"{key} must be an integer, got {value}")
            value = int(value)
        too_low = value <= low if open_low else value < low
        if too_low or value > high or value != value:
            lowest = f"> {low:g}" if open_low else f">= {low:g}"
            highest = "" if high == _POSITIVE else f" and <= {high:g}"
            raise ValueError(f"{key} must be {lowest}{highest}, got {value}")
        checked[key] = value
    return checked


class AggregationConfig(_Section):
    """The robust rule over the accepted file updates.

    ``options`` and ``pre_options`` are checked against :data:`RULE_OPTIONS` and
    :data:`PRE_OPTIONS` here, so that what reaches the rule in every round is known
    to be accepted before a run starts.
    """

    rule: Rule = "trimmed_mean"
    f: Annotated[int, Field(ge=0, le=MAX_NUM_FILES)] | Literal["auto"] = Field(
        default="auto",
        description="Byzantine inputs the rule must tolerate; 'auto': in every round, the "
        "accepted files that the liars not yet proven could have supplied between them "
        "(detection.max_adversaries of them), as far as the rule's breakdown allows.",
    )
    pre: PreRule | None = None
    options: dict[str, float | int] = Field(
        default_factory=dict, description="Keyword options of the rule."
    )
    pre_options: dict[str, float | int] = Field(
        default_factory=dict,
        description="Keyword options of the pre-aggregator (bucketing: s, seed).",
    )

    @field_validator("f", mode="before")
    @classmethod
    def _count_or_auto(cls, f: object) -> object:
        if isinstance(f, str) and f != "auto":
            raise ValueError(f"must be a whole number of files or 'auto', got {f!r}")
        return f

    @field_validator("options")
    @classmethod
    def _rule_options(
        cls, options: dict[str, float | int], info: ValidationInfo
    ) -> dict[str, float | int]:
        rule = info.data.get("rule")
        return _checked_options(str(rule), options, RULE_OPTIONS.get(str(rule), {}))

    @field_validator("pre_options")
    @classmethod
    def _pre_options(
        cls, options: dict[str, float | int], info: ValidationInfo
    ) -> dict[str, float | int]:
        pre = info.data.get("pre")
        if pre is None:
            if options:
                raise ValueError(
                    "pre_options given without aggregation.pre; name the pre-aggregator"
                )
            return options
        return _checked_options(str(pre), options, PRE_OPTIONS.get(str(pre), {}))

    @model_validator(mode="after")
    def _enough_groups(self) -> AggregationConfig:
        groups = self.options.get("groups")
        if groups is not None and self.f != "auto" and not groups > 2 * self.f:
            raise ValueError(
                f"aggregation.options: median_of_means groups must exceed 2 f = {2 * self.f}, "
                f"got {groups}"
            )
        return self


class AttackConfig(_Section):
    """Simulated adversaries (red team); ground truth is known in simulation only.

    ``name`` is a built-in attack, the entry-point name of an attack plug-in
    installed on the host, or a ``"package.module:Name"`` reference. Whether
    the host allows a reference, and whether the attack accepts ``params``, is
    checked before a run is queued or executed
    (:func:`phalanx.attacks.check_attack`), not here: this model imports no
    attack code.
    """

    name: str | None = Field(
        default=None,
        max_length=200,
        description='A built-in attack, an installed plug-in\'s name, or "package.module:Name" '
        "listed in the host's PHALANX_ATTACK_PLUGINS.",
    )

    @field_validator("name")
    @classmethod
    def _known_or_plugin(cls, name: str | None) -> str | None:
        if name is None or name in ATTACK_NAMES:
            return name
        if ":" in name:
            if is_reference(name):
                return name
            raise ValueError(f"attack plug-in {name!r} must look like 'package.module:Name'")
        if name in installed_attacks():
            return name
        raise ValueError(
            f"unknown attack {name!r}; choose one of {', '.join(ATTACK_NAMES)}, an installed "
            "plug-in's name, or a plug-in 'package.module:Name'"
        )

    q: int = Field(default=0, ge=0)
    selection: Literal["weak", "strong"] = "weak"
    strategy: Literal["all", "only_majorities", "fixed_disagreement"] = "all"
    params: dict[str, float | int | str | bool] = Field(default_factory=dict)


class TrainingConfig(_Section):
    """Worker-side computation and the server optimiser."""

    local_steps: int = Field(default=1, ge=1, le=1000)
    local_lr: float = Field(default=0.05, gt=0.0)
    optimizer: Literal["sgd", "adam", "amsgrad"] = "adam"
    server_lr: float = Field(default=1e-3, gt=0.0)
    momentum: float = Field(default=0.9, ge=0.0, lt=1.0)
    max_rounds_without_update: int = Field(
        default=3,
        ge=1,
        le=100_000,
        description="The run fails after this many rounds in a row applied no update (every "
        "file refused, dropped or left out), or when every round of a shorter run did.",
    )


class DeploymentConfig(_Section):
    """Where the run executes: Flower's simulation engine, or a SuperLink with real clients."""

    backend: Literal["simulation", "deployment"] = "simulation"
    superlink: str | None = Field(
        default=None, description="HOST:PORT; default: the coordinator's --superlink."
    )
    nodes_timeout_s: float = Field(default=600.0, gt=0.0)
    round_timeout_s: float = Field(default=600.0, gt=0.0)


class RunConfig(_Section):
    """Everything that defines a federated run; identical from the CLI and the API."""

    name: str = Field(default="run", min_length=1, max_length=200)
    seed: int = Field(default=0, ge=0, lt=2**63)
    rounds: int = Field(default=20, ge=1, le=100_000)
    data: DataConfig = DataConfig()
    assignment: AssignmentConfig = AssignmentConfig()
    detection: DetectionConfig = DetectionConfig()
    aggregation: AggregationConfig = AggregationConfig()
    attack: AttackConfig = AttackConfig()
    training: TrainingConfig = TrainingConfig()
    codec: CodecConfig = CodecConfig()
    deployment: DeploymentConfig = DeploymentConfig()
    systems: SystemsConfig = SystemsConfig()
    collect: CollectConfig = CollectConfig()
    asynchronous: AsynchronousConfig = AsynchronousConfig()

    @field_validator("codec", mode="before")
    @classmethod
    def _run_settings_only(cls, codec: object) -> object:
        # The codec's own settings never enter a run config, so its JSON tells the whole run.
        if isinstance(codec, Mapping):
            given = sorted(CODEC_ONLY.intersection(codec))
        elif isinstance(codec, CodecConfig):
            defaults = CodecConfig.model_fields
            given = sorted(n for n in CODEC_ONLY if getattr(codec, n) != defaults[n].default)
        else:
            given = []
        if given:
            raise ValueError(
                f"{', '.join(given)}: the codec's own settings, not a run's (runs use the "
                "codec's defaults)"
            )
        return codec

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        k = self.assignment.num_workers
        r = self.assignment.r
        if r > k:
            raise ValueError(f"assignment.r={r} exceeds assignment.num_workers={k}")
        if self.data.mode == "local":
            self._check_local_mode()
        if self.assignment.scheme == "none" and r != 1:
            raise ValueError(f"assignment.scheme='none' needs assignment.r=1, got r={r}")
        if self.attack.q >= k:
            raise ValueError(f"attack.q={self.attack.q} must be below assignment.num_workers={k}")
        if self.codec.error_feedback and r > 1:
            raise ValueError(
                "codec.error_feedback needs assignment.r=1: with replicas, honest workers "
                "would carry different errors and stop agreeing byte for byte"
            )
        if self.deployment.backend == "deployment" and self.attack.q > 0:
            raise ValueError(
                "attack.q > 0 simulates adversaries, which a deployment does not have; "
                "a deployed client turns Byzantine with PHALANX_BYZANTINE"
            )
        self._check_collection()
        self._check_asynchronous()
        if self.attack.q > 0 and self.attack.name is None:
            raise ValueError("attack.q > 0 needs attack.name (e.g. 'alie')")
        try:
            files = count_files(self.assignment.scheme, k, r, num_files=self.assignment.num_files)
        except ValueError as exc:
            raise ValueError(f"assignment: {exc}") from exc
        agg = self.aggregation
        needed = min_inputs(agg.rule, 0 if agg.f == "auto" else agg.f, agg.options)
        buffered = self.asynchronous.enabled
        inputs = self.asynchronous.buffer_size if buffered else files
        rows = rule_inputs(inputs, agg.pre, agg.pre_options)
        if rows < needed:
            given = "".join(f", {key}={value}" for key, value in sorted(agg.options.items()))
            after = f" ({rows} buckets after bucketing)" if rows != inputs else ""
            has = (
                f"asynchronous.buffer_size is {inputs}"
                if buffered
                else f"the {self.assignment.scheme} assignment has {files} files"
            )
            raise ValueError(
                f"aggregation.rule={agg.rule!r} with aggregation.f={agg.f}{given} needs at "
                f"least {needed} inputs per round; {has}{after}"
            )
        return self

    def _check_local_mode(self) -> None:
        a = self.assignment
        if a.r > 1 or a.scheme != "none":
            raise ValueError(
                f"data.mode = 'local' needs assignment.scheme = 'none' and assignment.r = 1, "
                f"got scheme={a.scheme!r}, r={a.r}: replicas of private data cannot be compared "
                "(each client trains on its own samples, which no other client holds)"
            )
        defaults = TrainingConfig.model_fields
        moved = sorted(
            name
            for name in ("local_steps", "local_lr")
            if getattr(self.training, name) != defaults[name].default
        )
        if moved:
            raise ValueError(
                f"training.{' and training.'.join(moved)} apply to assigned data; in "
                "data.mode = 'local' a client's training is set by data.local (epochs or "
                "steps, batch_size, lr, optimizer)"
            )
        if self.deployment.backend == "deployment" and self.data.partition is not None:
            raise ValueError(
                "data.partition divides a dataset among simulated clients; a deployed "
                "client trains on the data its node config names (data-path): leave "
                "data.partition out"
            )
        attack = self.attack
        if attack.q > 0 and self.deployment.backend == "deployment":
            raise ValueError(
                "attack.q > 0 with data.mode = 'local' in a deployment: simulated adversaries "
                "exist only in simulation, and a deployed client's Byzantine switch "
                "(phalanx-byzantine) lies on assigned files, not on local data yet; set "
                "attack.q = 0"
            )
        if attack.q > 0 and attack.strategy != "all":
            raise ValueError(
                f"attack.strategy = {attack.strategy!r} with data.mode = 'local': it chooses "
                "files by who else holds them, and with local data no other client holds an "
                "adversary's own file (r = 1); use attack.strategy = 'all' (each adversary "
                "attacks its own update)"
            )
        if attack.q > 0 and attack.selection != "weak":
            raise ValueError(
                f"attack.selection = {attack.selection!r} with data.mode = 'local': strong "
                "selection picks the workers that hold the most file majorities, and with "
                "local data every client holds only its own file; use attack.selection = "
                "'weak' (q clients at random)"
            )
        if self.systems.enabled:
            raise ValueError(
                "systems.enabled with data.mode = 'local': the systems model times assigned "
                "files (data.samples_per_file), not local training; turn it off"
            )

    def _check_asynchronous(self) -> None:
        """Refuse what asynchronous mode cannot do, each with the reason."""
        if not self.asynchronous.enabled:
            return
        r = self.assignment.r
        if r != 1:
            raise ValueError(
                f"asynchronous.enabled needs assignment.r = 1 (scheme 'none'), got r = {r}: "
                "in asynchronous mode each worker computes on the model version it was given, "
                "and replicas of one file computed on different versions cannot be compared, "
                "so redundancy would cost work and catch no liar; detection is outlier "
                "screening per buffer instead (detection.outlier_threshold)"
            )
        size, workers = self.asynchronous.buffer_size, self.assignment.num_workers
        if size > workers:
            raise ValueError(
                f"asynchronous.buffer_size is {size}, more than the {workers} workers: a "
                "worker holds at most one slot of a buffer (one that answers at once must "
                "not fill it alone), so the buffer could never fill; choose at most "
                f"{workers}, and fewer than that so that no buffer waits for the slowest"
            )
        deployed = self.deployment.backend == "deployment"
        if not deployed and not self.systems.enabled:
            raise ValueError(
                "asynchronous.enabled needs each worker's arrival times, which a simulation "
                "takes from the systems model: set systems.enabled = true"
            )
        collect = self.collect
        if collect != CollectConfig():
            raise ValueError(
                "collect settings decide when a synchronous round closes; asynchronous mode "
                "has no such round (the model moves every asynchronous.buffer_size arrivals): "
                "remove the collect section"
            )
        if self.codec.enabled:
            raise ValueError(
                "codec.enabled is not available with asynchronous.enabled: predictive coding "
                "predicts from the history of global updates both ends share, and workers on "
                "different model versions hold different histories; turn the codec off"
            )

    def _check_collection(self) -> None:
        policy = self.collect.policy
        partial = [
            name
            for name, on in (
                ("collect.messages = 'per_file'", self.collect.per_file),
                ("collect.drop_compute", bool(self.collect.drop_compute)),
            )
            if on
        ]
        if self.deployment.backend == "deployment":
            # Deployed rounds close by the policy on real arrival times; per-file
            # messages and compute budgets are real there too (workers time their files).
            if self.systems.enabled:
                raise ValueError(
                    "systems.enabled simulates devices, which a deployment has for real; "
                    "turn it off for deployment.backend = 'deployment'"
                )
        elif partial and not self.systems.enabled:
            raise ValueError(
                f"{' and '.join(partial)} needs compute times, which a simulation takes from "
                "the systems model: set systems.enabled = true"
            )
        elif policy != "all" and not self.systems.enabled:
            raise ValueError(
                f"collect.policy = {policy!r} needs arrival times, which a simulation takes "
                "from the systems model: set systems.enabled = true"
            )


MAX_CONFIG_BYTES = 65_536
"""Largest run config file read: the biggest real one is about 1 kB (device traces are
files of their own), and a hostile one could otherwise be gigabytes, or dotted keys that
Python's TOML parser takes time quadratic in their count to read (8 s for 50 kB)."""


def load_run_config(path: Path) -> RunConfig:
    """Read a run configuration from a TOML or JSON file.

    Raises
    ------
    FileNotFoundError
        When nothing is at ``path``.
    ValueError
        When the file is neither TOML nor JSON (by its suffix), is not a regular file
        (a directory, a device, a FIFO), is larger than `MAX_CONFIG_BYTES`, cannot be
        parsed (or is nested too deeply to parse), or holds an invalid configuration
        (pydantic's ``ValidationError`` names the field).
    """
    if path.suffix not in (".toml", ".json"):
        raise ValueError("run configs are .toml or .json files")
    if not path.exists():
        raise FileNotFoundError("no such file")
    if not path.is_file():  # a device (/dev/zero) or a FIFO would be read for ever
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise ValueError(f"{kind}: a run config is a .toml or .json file")
    with path.open("rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"larger than {MAX_CONFIG_BYTES:,} bytes: not a run config")
    text = raw.decode("utf-8")
    data: dict[str, Any]
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except RecursionError:  # the parsers recurse once per level of nesting
        raise ValueError("nested too deeply to be a run config") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's own limit, in Python's words
            raise ValueError(
                f"holds an integer of more than {sys.get_int_max_str_digits():,} digits: "
                "not a run config"
            ) from None
        raise
    if data == {}:
        raise ValueError(
            "holds no settings: an empty file would start a run of every default; "
            "name what to run (see examples/quick-digits.toml)"
        )
    return RunConfig.model_validate(data)
