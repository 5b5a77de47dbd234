"""The precision of a local model's forward pass: ``"float32"``, ``"bfloat16"``, or
``"auto"`` (bfloat16 where the CPU computes it natively, AVX512-BF16 or AMX, else float32).

A bfloat16 pass runs through a traced bfloat16 copy of the model, kept only when every
probe text's vector is within cosine 0.999 of the float32 one (``_traced.trace_encoder``);
otherwise the float32 pass is used. The vectors stay float32 arrays either way, so vectors
encoded at either precision can be compared with one another.
"""

from __future__ import annotations

import functools

from khora_core.errors import ConfigError

__all__ = ["PRECISIONS", "checked_precision", "native_bfloat16", "wants_bfloat16"]

PRECISIONS = ("auto", "float32", "bfloat16")


@functools.cache
def native_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX; read from Linux's
    ``/proc/cpuinfo``, so False elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def checked_precision(value: str, *, field: str, setting: str) -> str:
    """``value`` when it is one of :data:`PRECISIONS`.

    Raises:
        ConfigError: any other value, naming ``field`` and its environment variable ``setting``.
    """
    if value not in PRECISIONS:
        raise ConfigError(
            f"{field} ({setting}) must be 'auto', 'float32' or 'bfloat16', not {value!r}",
            setting=setting,
        )
    return value


def wants_bfloat16(precision: str) -> bool:
    """Whether a pass at ``precision`` should try the bfloat16 copy on this CPU."""
    return native_bfloat16() if precision == "auto" else precision == "bfloat16"
