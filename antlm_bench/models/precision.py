"""Which arithmetic a model trains or fine-tunes in: one decision shared by ``train``, ``run``, ``sweep`` and GLUE.

bfloat16 autocast (matmuls in bf16, float32 master weights, float32 loss, softmax and norms) pays wherever the chip
multiplies bf16 natively: on CUDA, and on CPUs with AVX512-BF16 or AMX-BF16, where bf16 matmuls measured 5-10x
float32's speed (an AMD EPYC with avx512_bf16: 385 against 37 GFLOP/s at 2048x256x256). A CPU without either
emulates bf16: an AVX2-only AMD EPYC measured 1.8 against 30 GFLOP/s, 17x slower (docs/precision.md). So ``auto`` asks the CPU what it has (``torch.cpu.get_capabilities``) and
then measures it (:func:`measure_bf16_speedup`, a ~0.1 s probe, robust to other processes on the cores: the
fastest of many interleaved calls of each): bf16 only where both say yes, and only for models
whose matmuls are large enough to gain (:data:`MIN_BF16_HIDDEN`: below it the casts around each small matmul cost
more than the product saves; measured in ``benchmarks/precision.py``). ``--precision fp32|bf16`` overrides; the
choice and its reason are recorded in run.json, and the precision is part of the run's configuration
fingerprint, so seeds trained in bf16 and in float32 are never pooled as one configuration.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from antlm_bench.errors import UserError

PrecisionName = Literal["fp32", "bf16"]
PRECISION_CHOICES = ("auto", "fp32", "bf16")
# bf16 autocast must make a matmul at least this much faster than float32 for `auto` to take it
MIN_BF16_SPEEDUP = 1.5
# below this hidden size (the tiny presets' 64) the casts cost more than bf16 matmuls save on CPU
MIN_BF16_HIDDEN = 128
_NATIVE_BF16 = ("amx_bf16", "avx512_bf16")


@dataclass(frozen=True)
class Precision:
    """What a run computes in, and why (recorded as run.json's ``precision`` and ``precision_reason``)."""

    name: PrecisionName
    reason: str

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.name == "bf16" else None

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The context a forward pass runs under: bf16 autocast, or nothing (float32 throughout)."""
        if self.name == "bf16":
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()


def cpu_bf16_instructions() -> list[str]:
    """The native bf16 instruction sets this CPU reports (empty: bf16 is emulated here, or torch cannot tell)."""
    try:
        capabilities = torch.cpu.get_capabilities()
    except (AttributeError, RuntimeError):  # torch before 2.6 has no capability table: only the probe decides
        return []
    return [name for name in _NATIVE_BF16 if capabilities.get(name)]


def fastest_ratio(slow: Callable[[], object], fast: Callable[[], object], calls: int = 40,
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """The fastest call of ``slow`` over the fastest call of ``fast``, the two interleaved ``calls`` times each.

    Each call is timed alone and only the fastest of each counts: a call that another process preempted is slower,
    never faster, so the minimum is the machine's speed whatever else runs beside it, and interleaving gives both
    the same chances. (Timing each side for one stretch, as before, measured 2.0-2.4x on a quiet 2-core EPYC and
    1.1-1.3x with three training processes on its two cores, and ``auto`` then trained arms of one study in
    different precisions.)"""
    best_slow = best_fast = math.inf
    for _ in range(calls):
        for fn, which in ((slow, "slow"), (fast, "fast")):
            start = clock()
            fn()
            elapsed = clock() - start
            if which == "slow":
                best_slow = min(best_slow, elapsed)
            else:
                best_fast = min(best_fast, elapsed)
    return best_slow / best_fast if best_fast > 0 else math.inf


@functools.lru_cache(maxsize=1)
def measure_bf16_speedup(size: int = 256, calls: int = 40) -> float:
    """float32 time / bf16 time of one ``size``-cubed matmul on this CPU, on the current thread count: the fastest
    of ``calls`` interleaved calls of each after a warm-up (:func:`fastest_ratio`). Measured once per process,
    ~0.05 s."""
    operands = {dtype: (torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype))
                for dtype in (torch.float32, torch.bfloat16)}
    for a, b in operands.values():
        for _ in range(2):
            a @ b
    (a32, b32), (a16, b16) = operands[torch.float32], operands[torch.bfloat16]
    return fastest_ratio(lambda: a32 @ b32, lambda: a16 @ b16, calls)


def resolve_precision(requested: str, device: torch.device, hidden_size: int | None = None, *,
                      option: str = "--precision",
                      speedup: Callable[[], float] = measure_bf16_speedup) -> Precision:
    """``auto``, ``fp32`` or ``bf16`` -> the precision to run in, with its reason. ``hidden_size`` is the model's
    width (None: unknown, taken as large enough). ``speedup`` measures bf16 against float32 on this CPU."""
    if requested not in PRECISION_CHOICES:
        raise UserError(f"{option} {requested}: unknown; use one of {', '.join(PRECISION_CHOICES)}")
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
        if requested == "bf16" and not supported:
            raise UserError(f"{option} bf16: this GPU has no bfloat16 support; use {option} fp32")
        if requested == "fp32":
            return Precision("fp32", option + " fp32")
        if requested == "bf16":
            return Precision("bf16", option + " bf16")
        return Precision("bf16", "auto: CUDA with bf16") if supported else Precision(
            "fp32", "auto: this GPU has no bf16")
    if device.type != "cpu":
        if requested == "bf16":
            raise UserError(f"{option} bf16: supported on cpu and cuda only, not {device.type}; use {option} fp32")
        return Precision("fp32", f"{option} fp32" if requested == "fp32" else f"auto: float32 on {device.type}")
    native = cpu_bf16_instructions()
    if requested == "fp32":
        return Precision("fp32", option + " fp32")
    if requested == "bf16":
        return Precision("bf16", option + " bf16" + ("" if native else
                                                     " (this CPU has no native bf16: expect it to be slow)"))
    if not native:
        return Precision("fp32", "auto: this CPU has no native bf16 (avx512_bf16 / amx_bf16); float32")
    if hidden_size is not None and hidden_size < MIN_BF16_HIDDEN:
        return Precision("fp32", f"auto: hidden size {hidden_size} < {MIN_BF16_HIDDEN}, too small for bf16 to pay "
                                 "on CPU; float32")
    ratio = speedup()
    if ratio < MIN_BF16_SPEEDUP:
        return Precision("fp32", f"auto: {'/'.join(native)}, but a bf16 matmul measured only {ratio:.1f}x float32 "
                                 f"(< {MIN_BF16_SPEEDUP}x); float32")
    return Precision("bf16", f"auto: {'/'.join(native)}, bf16 matmul measured {ratio:.1f}x float32")


__all__ = ["MIN_BF16_HIDDEN", "MIN_BF16_SPEEDUP", "PRECISION_CHOICES", "Precision", "cpu_bf16_instructions",
           "fastest_ratio", "measure_bf16_speedup", "resolve_precision"]
