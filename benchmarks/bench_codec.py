"""Throughput and rate of ``phalanx.codec`` on a 1M-parameter update, beside zstd.

The model is a small CNN for 28x28 images (conv 1->32, conv 32->64, fc
7680->128, fc 128->10: 1,003,274 parameters). Its updates are synthetic but
shaped like training's: heavy-tailed (Student-t, 4 degrees of freedom), a
different scale per layer, and correlated from round to round (AR(1), rho 0.9)
so that the predictors have something to predict. The coordinator broadcasts
``-lr * g`` as the global delta through :class:`phalanx.codec.GlobalModel` for a
few rounds; then a worker's update (the next gradient plus minibatch noise) is
encoded and decoded.

Measured, in one process on one core (``torch.set_num_threads(1)``, BLAS and
OpenMP limited to one thread; the codec itself is single-threaded NumPy and
``constriction``):

- encode and decode throughput in MB/s of ``float32`` input, with zstd level 3
  compressing and decompressing the same raw ``float32`` bytes in the same run,
  and the ratios codec / zstd. Times are the best of ``--repeats`` rounds, in
  CPU time of this process (robust to other processes sharing the machine);
  wall-clock times are reported beside them. Each round runs zstd and the
  codec (warm and empty history, encode and decode) once each, in turn, so
  every measurement sees the machine's quiet and busy moments alike;
- bytes sent (every byte of the payload) against the raw size and zstd's;
- the coder's overhead: bits the ANS coder spent against the empirical entropy
  of the symbols it coded, and the whole payload (headers and tables too)
  against that entropy;
- the rate-distortion trade-off for several ``lambda``.

Writes ``benchmarks/results/codec.json`` and ``codec.md`` (``codec_quick.*`` with
``--quick``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import zstandard  # noqa: E402

from phalanx.codec import (  # noqa: E402
    CodecConfig,
    DeltaHistory,
    EncodedUpdate,
    GlobalModel,
    decode_update_flat,
    encode_update,
    layer_layout,
)

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.results import (  # noqa: E402
    RESULTS,
    load_average,
    machine,
    report_path,
    version,
    write_json,
    write_markdown,
)

SPEC = [
    ("conv1.weight", (32, 1, 3, 3)),
    ("conv1.bias", (32,)),
    ("conv2.weight", (64, 32, 3, 3)),
    ("conv2.bias", (64,)),
    ("fc1.weight", (128, 7680)),
    ("fc1.bias", (128,)),
    ("fc2.weight", (10, 128)),
    ("fc2.bias", (10,)),
]
LAYER_SCALE = (3e-2, 1e-2, 8e-3, 4e-3, 1e-3, 2e-3, 6e-3, 1e-2)
RHO = 0.9
SERVER_LR = 0.05
ROUNDS = 5
SEED_CONTEXT = (2024, ROUNDS, 7)


def heavy_tailed(rng: np.random.Generator) -> np.ndarray:
    """One gradient-shaped draw: Student-t(4) per layer, at the layer's scale."""
    layout = layer_layout(SPEC)
    parts = [rng.standard_t(4, size) * s for size, s in zip(layout.sizes, LAYER_SCALE, strict=True)]
    return np.concatenate(parts).astype(np.float32)


def trajectory(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Gradients of ``ROUNDS`` rounds (AR(1) in time) and the next worker update."""
    rng = np.random.default_rng(seed)
    gradient = heavy_tailed(rng)
    gradients = [gradient]
    for _ in range(ROUNDS):
        gradient = (RHO * gradient + np.sqrt(1 - RHO**2) * heavy_tailed(rng)).astype(np.float32)
        gradients.append(gradient)
    worker_update = (gradients[-1] + 0.3 * heavy_tailed(rng)).astype(np.float32)
    return gradients[:-1], worker_update


def warm_history(config: CodecConfig, gradients: list[np.ndarray]) -> DeltaHistory:
    """The history every party holds after ``ROUNDS`` compressed broadcasts of ``-lr * g``."""
    layout = layer_layout(SPEC)
    coordinator = GlobalModel(layout, np.zeros(layout.total, np.float32), config=config)
    for round_, gradient in enumerate(gradients):
        coordinator.broadcast(-SERVER_LR * gradient, run_seed=SEED_CONTEXT[0], round=round_)
    return coordinator.history


Calls = dict[str, Callable[[], object]]
Times = dict[str, tuple[float, float]]


def best_times(calls: Calls, repeats: int) -> Times:
    """Best CPU time and best wall time of each call, in seconds, over ``repeats`` rounds.

    Each call runs once to warm up, then every round runs each call once, in
    turn: a burst of load from other processes hits all of them alike.
    """
    for fn in calls.values():
        fn()
    best = dict.fromkeys(calls, (float("inf"), float("inf")))
    for _ in range(repeats):
        for name, fn in calls.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            best[name] = (min(best[name][0], cpu), min(best[name][1], wall))
    return best


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6


def codec_calls(update: np.ndarray, history: DeltaHistory, config: CodecConfig) -> Calls:
    """``encode`` and ``decode`` of ``update``, ready to time."""
    layout = layer_layout(SPEC)

    def encode() -> Any:
        return encode_update(
            update, layers_spec=layout, history=history, config=config, seed_context=SEED_CONTEXT
        )

    payload = encode().payload

    def decode() -> np.ndarray:
        return decode_update_flat(payload, layers_spec=layout, history=history, config=config)

    return {"encode": encode, "decode": decode}


def measure(
    update: np.ndarray, history: DeltaHistory, config: CodecConfig, times: Times
) -> dict[str, Any]:
    """Sizes and the quality of the reconstruction of ``update``, with its ``times``."""
    calls = codec_calls(update, history, config)
    encoded = calls["encode"]()
    decoded = calls["decode"]()
    assert isinstance(encoded, EncodedUpdate) and isinstance(decoded, np.ndarray)
    identical = bool(np.array_equal(decoded.view(np.uint32), encoded.flat.view(np.uint32)))
    (enc_cpu, enc_wall), (dec_cpu, dec_wall) = times["encode"], times["decode"]
    raw = update.nbytes
    stats = encoded.stats
    error = update.astype(np.float64) - decoded
    energy = float(np.sum(update.astype(np.float64) ** 2))
    cosine = float(
        np.dot(update.astype(np.float64), decoded)
        / np.sqrt(energy * float(np.sum(decoded.astype(np.float64) ** 2)) + 1e-300)
    )
    return {
        "rd_lambda": config.rd_lambda,
        "bytes": stats.total_bytes,
        "side_bytes": stats.side_bytes,
        "coded_bytes": stats.coded_bytes,
        "percent_of_raw": 100.0 * stats.total_bytes / raw,
        "compression_ratio": stats.compression_ratio,
        "bits_per_parameter": stats.bits_per_parameter,
        "entropy_bits": stats.entropy_bits,
        "coded_bits": stats.coded_bits,
        "coder_overhead_percent": 100.0 * stats.coder_overhead,
        "payload_overhead_percent": 100.0 * stats.total_overhead,
        "estimated_bits": sum(s.estimated_rate * s.size for s in stats.layers),
        "relative_distortion": float(np.sum(error**2)) / energy,
        "cosine": cosine,
        "decoder_matches_encoder": identical,
        "encode_cpu_s": enc_cpu,
        "decode_cpu_s": dec_cpu,
        "encode_wall_s": enc_wall,
        "decode_wall_s": dec_wall,
        "encode_mbps": mbps(raw, enc_cpu),
        "decode_mbps": mbps(raw, dec_cpu),
        "roundtrip_mbps": mbps(raw, enc_cpu + dec_cpu),
        "roundtrip_wall_mbps": mbps(raw, enc_wall + dec_wall),
        "layers": [
            {
                "name": s.name,
                "size": s.size,
                "predictor": s.predictor.name,
                "quantizer": s.quantizer.name,
                "multiplier": round(s.multiplier, 3),
                "gain": s.gain,
                "alphabet": s.alphabet,
                "bits_per_parameter": (s.coded_bits / s.size if s.size else 0.0),
                "estimated_rate": s.estimated_rate,
                "estimated_distortion": s.estimated_distortion,
            }
            for s in stats.layers
        ],
    }


def zstd_calls(update: np.ndarray) -> Calls:
    """zstd level 3 compressing and decompressing the raw ``float32`` bytes, ready to time."""
    raw = update.tobytes()
    compressor = zstandard.ZstdCompressor(level=3)
    decompressor = zstandard.ZstdDecompressor()
    compressed = compressor.compress(raw)
    assert decompressor.decompress(compressed) == raw
    return {
        "encode": lambda: compressor.compress(raw),
        "decode": lambda: decompressor.decompress(compressed),
    }


def measure_zstd(update: np.ndarray, times: Times) -> dict[str, Any]:
    raw = update.tobytes()
    compressed = zstandard.ZstdCompressor(level=3).compress(raw)
    (enc_cpu, enc_wall), (dec_cpu, dec_wall) = times["encode"], times["decode"]
    return {
        "bytes": len(compressed),
        "percent_of_raw": 100.0 * len(compressed) / len(raw),
        "compression_ratio": len(raw) / len(compressed),
        "encode_cpu_s": enc_cpu,
        "decode_cpu_s": dec_cpu,
        "encode_wall_s": enc_wall,
        "decode_wall_s": dec_wall,
        "encode_mbps": mbps(len(raw), enc_cpu),
        "decode_mbps": mbps(len(raw), dec_cpu),
        "roundtrip_mbps": mbps(len(raw), enc_cpu + dec_cpu),
        "roundtrip_wall_mbps": mbps(len(raw), enc_wall + dec_wall),
    }


def replicas_agree(update: np.ndarray, gradients: list[np.ndarray], config: CodecConfig) -> bool:
    """Two workers with separately built histories send the same bytes."""
    layout = layer_layout(SPEC)
    payloads = [
        encode_update(
            update.copy(),
            layers_spec=layout,
            history=warm_history(config, [g.copy() for g in gradients]),
            config=config,
            seed_context=SEED_CONTEXT,
        ).payload
        for _ in range(2)
    ]
    return payloads[0] == payloads[1]


def markdown(result: dict[str, Any]) -> str:
    main, cold, z = result["codec"], result["codec_cold"], result["zstd"]
    goals = result["goals"]
    lines = [
        "# Codec throughput and rate (`benchmarks/bench_codec.py`)",
        "",
        f"{result['parameters']:,}-parameter update ({result['raw_bytes']:,} bytes of float32), "
        f"a CNN for 28x28 images; synthetic heavy-tailed gradients, AR(1) in time "
        f"(rho {RHO}); history of {ROUNDS} compressed broadcasts. One core: "
        "`torch.set_num_threads(1)`, BLAS/OpenMP at one thread; times are the best of "
        f"{result['repeats']} rounds in process CPU time (wall time beside), each round "
        "running zstd and the codec's four measurements once, in turn. zstd level 3 runs "
        "on the raw float32 bytes in the same process. "
        + (
            "`CodecConfig(unbiased=True)` (stochastic rounding, `--unbiased`) "
            if result["config"].get("unbiased")
            else "Default `CodecConfig` "
        )
        + f"(lambda {main['rd_lambda']}).",
        "",
        f"Machine: {result['machine']}, {result['cpu_count']} cores, load average "
        f"{result['load_average_before']:.1f} before and {result['load_average_after']:.1f} after "
        "the run (other processes compete for the cores: CPU time is the figure to read, wall "
        f"time is only as good as the machine was idle); Python {result['python']}; numpy "
        f"{result['numpy']}; constriction {result['constriction']}; zstandard "
        f"{result['zstandard']}.",
        "",
        "## Throughput (MB/s of float32 input)",
        "",
        "| | encode | decode | encode + decode | encode + decode (wall) |",
        "|---|---|---|---|---|",
        f"| phalanx.codec, warm history | {main['encode_mbps']:.0f} | {main['decode_mbps']:.0f} | "
        f"{main['roundtrip_mbps']:.0f} | {main['roundtrip_wall_mbps']:.0f} |",
        f"| phalanx.codec, empty history | {cold['encode_mbps']:.0f} | {cold['decode_mbps']:.0f} | "
        f"{cold['roundtrip_mbps']:.0f} | {cold['roundtrip_wall_mbps']:.0f} |",
        f"| zstd level 3 (lossless) | {z['encode_mbps']:.0f} | {z['decode_mbps']:.0f} | "
        f"{z['roundtrip_mbps']:.0f} | {z['roundtrip_wall_mbps']:.0f} |",
        f"| **ratio codec / zstd** (warm) | {main['encode_mbps'] / z['encode_mbps']:.2f} | "
        f"{main['decode_mbps'] / z['decode_mbps']:.2f} | "
        f"{main['roundtrip_mbps'] / z['roundtrip_mbps']:.2f} | "
        f"{main['roundtrip_wall_mbps'] / z['roundtrip_wall_mbps']:.2f} |",
        "",
        "## Bytes sent",
        "",
        "| | bytes | % of raw | ratio | bits / parameter | relative distortion | cosine |",
        "|---|---|---|---|---|---|---|",
        f"| phalanx.codec, warm history | {main['bytes']:,} | {main['percent_of_raw']:.2f} | "
        f"{main['compression_ratio']:.1f} | {main['bits_per_parameter']:.3f} | "
        f"{main['relative_distortion']:.4f} | {main['cosine']:.4f} |",
        f"| phalanx.codec, empty history | {cold['bytes']:,} | {cold['percent_of_raw']:.2f} | "
        f"{cold['compression_ratio']:.1f} | {cold['bits_per_parameter']:.3f} | "
        f"{cold['relative_distortion']:.4f} | {cold['cosine']:.4f} |",
        f"| zstd level 3 | {z['bytes']:,} | {z['percent_of_raw']:.2f} | "
        f"{z['compression_ratio']:.2f} | {32 * z['bytes'] / result['raw_bytes']:.2f} | 0 | 1 |",
        "",
        "Every payload byte is counted: header, layer table (shapes, choices, gains, steps, "
        "frequency tables) and the ANS words.",
        "",
        "## Coder overhead against the empirical entropy of the symbols",
        "",
        "| | entropy (bits) | ANS bits | coder overhead | whole payload overhead | "
        "search's rate estimate / actual |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in (("warm history", main), ("empty history", cold)):
        lines.append(
            f"| {label} | {row['entropy_bits']:,.0f} | {row['coded_bits']:,} | "
            f"{row['coder_overhead_percent']:.3f} % | {row['payload_overhead_percent']:.3f} % | "
            f"{row['estimated_bits'] / (8 * row['bytes']):.3f} |"
        )
    lines += [
        "",
        "## Rate-distortion trade-off (warm history)",
        "",
        "| lambda | bytes | % of raw | bits / parameter | relative distortion | cosine | "
        "encode + decode MB/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["sweep"]:
        lines.append(
            f"| {row['rd_lambda']} | {row['bytes']:,} | {row['percent_of_raw']:.2f} | "
            f"{row['bits_per_parameter']:.3f} | {row['relative_distortion']:.4f} | "
            f"{row['cosine']:.4f} | {row['roundtrip_mbps']:.0f} |"
        )
    lines += [
        "",
        "## Choices per layer (warm history, default lambda)",
        "",
        "| layer | size | predictor | quantizer | step (x RMS) | gain | alphabet "
        "| coded bits / param |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layer in main["layers"]:
        lines.append(
            f"| {layer['name']} | {layer['size']:,} | {layer['predictor']} | "
            f"{layer['quantizer']} | {layer['multiplier']} | {layer['gain']:.4g} | "
            f"{layer['alphabet']} | "
            f"{layer['bits_per_parameter']:.3f} |"
        )
    lines += [
        "",
        "## Goals",
        "",
        f"- encode + decode >= 100 MB/s on one core: **{main['roundtrip_mbps']:.0f} MB/s** "
        f"(warm), {cold['roundtrip_mbps']:.0f} MB/s (empty history): "
        f"{'met' if goals['throughput_met'] else 'NOT met'}.",
        f"- coder overhead <= 3 %: **{main['coder_overhead_percent']:.3f} %** (ANS bits against "
        f"the symbols' entropy); with every header and table byte, "
        f"{main['payload_overhead_percent']:.2f} %: "
        f"{'met' if goals['overhead_met'] else 'NOT met'}.",
        f"- decoder output equals the encoder's reconstruction bit for bit: "
        f"{main['decoder_matches_encoder'] and cold['decoder_matches_encoder']}; two honest "
        f"replicas send identical bytes: {result['replicas_agree']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, three lambdas")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per measurement")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for codec.json/.md")
    parser.add_argument(
        "--unbiased",
        action="store_true",
        help="measure the unbiased (stochastically rounded) uplink mode, codec.unbiased",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    repeats = args.repeats or (5 if args.quick else 30)
    lambdas = (0.03, 0.1, 0.3) if args.quick else (0.01, 0.03, 0.1, 0.3, 1.0)

    gradients, update = trajectory(seed=1)
    config = CodecConfig(unbiased=args.unbiased)
    history = warm_history(config, gradients)
    cold_history = DeltaHistory.from_config(SPEC, config)

    host = machine()
    result: dict[str, Any] = {
        "load_average_before": load_average(),
        "parameters": layer_layout(SPEC).total,
        "raw_bytes": update.nbytes,
        "repeats": repeats,
        "threads": {"torch": torch.get_num_threads(), "omp": os.environ["OMP_NUM_THREADS"]},
        "machine": f"{host.architecture} {host.processor}".strip(),
        "python": host.python,
        "numpy": version("numpy"),
        "constriction": version("constriction"),
        "zstandard": version("zstandard"),
        "config": {
            "predictors": [p.name for p in config.predictors],
            "step_sizes": list(config.step_sizes),
            "ternary": config.ternary,
            "unbiased": config.unbiased,
            "rd_lambda": config.rd_lambda,
            "censor_threshold": config.censor_threshold,
            "history_length": config.history_length,
            "momentum": config.momentum,
            "rd_sample_size": config.rd_sample_size,
        },
    }
    cases = {
        "zstd": zstd_calls(update),
        "codec": codec_calls(update, history, config),
        "codec_cold": codec_calls(update, cold_history, config),
    }
    times = best_times(
        {f"{case} {op}": fn for case, calls in cases.items() for op, fn in calls.items()},
        repeats,
    )

    def times_of(case: str) -> Times:
        return {op: times[f"{case} {op}"] for op in ("encode", "decode")}

    result["zstd"] = measure_zstd(update, times_of("zstd"))
    result["codec"] = measure(update, history, config, times_of("codec"))
    result["codec_cold"] = measure(update, cold_history, config, times_of("codec_cold"))
    result["sweep"] = []
    for rd_lambda in lambdas:
        swept = config.model_copy(update={"rd_lambda": rd_lambda})
        swept_history = warm_history(swept, gradients)
        row = measure(
            update,
            swept_history,
            swept,
            best_times(codec_calls(update, swept_history, swept), max(3, repeats // 3)),
        )
        row.pop("layers")
        result["sweep"].append(row)
    result["replicas_agree"] = replicas_agree(update, gradients, config)
    result["load_average_after"] = load_average()
    result["cpu_count"] = host.cores
    main_row, cold_row = result["codec"], result["codec_cold"]
    result["goals"] = {
        "throughput_mbps": 100.0,
        "throughput_met": min(main_row["roundtrip_mbps"], cold_row["roundtrip_mbps"]) >= 100.0,
        "coder_overhead_percent": 3.0,
        "overhead_met": max(main_row["coder_overhead_percent"], cold_row["coder_overhead_percent"])
        <= 3.0,
    }
    write_json(report_path(args.out, "codec", ".json", quick=args.quick), result)
    write_markdown(report_path(args.out, "codec", ".md", quick=args.quick), markdown(result))
    ok = (
        main_row["decoder_matches_encoder"]
        and cold_row["decoder_matches_encoder"]
        and result["replicas_agree"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
