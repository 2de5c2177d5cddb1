"""What the CPU can do, read without torch (so that a command's settings can default to it
before torch is imported)."""

from __future__ import annotations


def fast_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (Intel AMX or AVX512-BF16,
    read from Linux's ``/proc/cpuinfo``): there ``bfloat16=True`` makes training's updates
    faster (``benchmarks/README.md``); elsewhere bfloat16 is emulated and slower. False where
    the flags cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False
