"""Parameter validation with messages that say what is wrong and what is expected."""

from __future__ import annotations

import math
import numbers


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(name: str, value, *, minimum: int = 1) -> int:
    if not _is_int(value):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def nonneg_int(name: str, value) -> int:
    return positive_int(name, value, minimum=0)


def _finite_real(name: str, value, *, strict: bool) -> float:
    kind = "positive" if strict else "non-negative"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a {kind} number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (strict and value == 0):
        raise ValueError(f"{name} must be a {kind} finite number, got {value}")
    return value


def positive_float(name: str, value) -> float:
    return _finite_real(name, value, strict=True)


def nonneg_float(name: str, value) -> float:
    return _finite_real(name, value, strict=False)


def probability_open(name: str, value) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")
    return value


def choice(name: str, value, options) -> str:
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def boolean(name: str, value) -> bool:
    """A yes/no switch: only ``True`` or ``False`` (a string such as ``"False"`` would be
    truthy and silently turn an ablation the other way)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def interval(name: str, value, low: float, high: float, *, low_closed: bool = True,
             high_closed: bool = False) -> float:
    """A real number in the interval from ``low`` to ``high`` (ends closed or open as asked);
    no bools, strings or NaN."""
    shown = f"{'[' if low_closed else '('}{low:g}, {high:g}{']' if high_closed else ')'}"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number in {shown}, got {value!r}")
    value = float(value)
    above = value >= low if low_closed else value > low
    below = value <= high if high_closed else value < high
    if not (above and below):
        raise ValueError(f"{name} must be in {shown}, got {value}")
    return value


def rdp_orders(name: str, orders):
    """Rényi orders as a float64 vector: non-empty, finite and > 1 (an order <= 1 makes
    log(1/δ)/(α-1) negative or infinite, and a conversion from it a wrong ε). Vectorised: the
    DP-SGD ledgers convert at ~25 step counts per budget."""
    import numpy as np

    arr = np.asarray(orders, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty vector, got shape {arr.shape}")
    if not (np.isfinite(arr).all() and (arr > 1).all()):
        bad = arr[~(np.isfinite(arr) & (arr > 1))]
        raise ValueError(f"{name} must be finite numbers > 1, got {bad[:3]}")
    return arr
