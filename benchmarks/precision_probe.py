"""How steady is `--precision auto`'s bf16 probe when other processes share the cores?

`auto` trains in bf16 on a CPU with native bf16 when a matmul probe measures bf16 at least 1.5x float32
(antlm_bench/models/precision.py). The probe used to time one stretch of each dtype; with other training processes
on the cores one stretch could be preempted and the other not, and arms of one study then resolved to different
precisions. It now keeps the fastest of many interleaved calls of each. This script runs both probes ROUNDS times,
quiet and then beside BUSY busy-looping processes, and prints each reading and how many fall under the threshold.

    OMP_NUM_THREADS=1 python benchmarks/precision_probe.py --rounds 8 --busy 3
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import torch

from antlm_bench.models.precision import MIN_BF16_SPEEDUP, measure_bf16_speedup


def stretch_probe(size: int = 256, seconds: float = 0.04) -> float:
    """The probe before: each dtype timed for one stretch of ``seconds``, bf16 rate over float32 rate."""

    def rate(dtype: torch.dtype) -> float:
        a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
        for _ in range(2):
            a @ b
        runs, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or runs < 3:
            a @ b
            runs += 1
        return runs / elapsed

    return rate(torch.bfloat16) / rate(torch.float32)


def interleaved_probe() -> float:
    measure_bf16_speedup.cache_clear()
    return measure_bf16_speedup()


def _burn(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def readings(rounds: int) -> dict[str, list[float]]:
    return {name: [probe() for _ in range(rounds)] for name, probe in
            (("stretch (before)", stretch_probe), ("fastest interleaved (now)", interleaved_probe))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--busy", type=int, default=3, help="busy-looping processes beside the probe")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"bf16 / float32 matmul speed, 256-cubed, one thread; `auto` takes bf16 at >= {MIN_BF16_SPEEDUP}x")
    for label, busy in (("quiet", 0), (f"beside {args.busy} busy processes", args.busy)):
        stop_at = time.time() + 600
        workers = [multiprocessing.Process(target=_burn, args=(stop_at,), daemon=True) for _ in range(busy)]
        for worker in workers:
            worker.start()
        time.sleep(0.5 if busy else 0)
        try:
            for name, values in readings(args.rounds).items():
                low = sum(v < MIN_BF16_SPEEDUP for v in values)
                print(f"{label:>28} | {name:<26} | min {min(values):.2f} max {max(values):.2f} | "
                      f"{low}/{len(values)} under {MIN_BF16_SPEEDUP}x | " + " ".join(f"{v:.2f}" for v in values))
        finally:
            for worker in workers:
                worker.terminate()


if __name__ == "__main__":
    main()
