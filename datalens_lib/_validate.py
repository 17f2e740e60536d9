"""Parameter validation with messages that say what is wrong and what is expected."""

from __future__ import annotations

import math
import numbers

#: the largest integer a parameter may take: beyond it numpy (int64) and float arithmetic
#: overflow, e.g. ``queries * rdp`` or ``math.sqrt(k)``
MAX_INT = 2**63 - 1


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _shown(value) -> str:
    """``value`` for a message; an integer of hundreds of digits is cut short."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:12]}... ({len(text)} characters)"


def _as_float(value) -> float:
    """float(value); a real too large for a float (a huge int or Fraction) becomes +-inf, so
    that the callers refuse it as non-finite instead of raising OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def square(x: float) -> float:
    """x ** 2 for a validated float; +inf where it overflows (float ``**`` raises
    OverflowError there, e.g. sigma = 1e300)."""
    try:
        return x**2
    except OverflowError:
        return math.inf


def positive_int(name: str, value, *, minimum: int = 1) -> int:
    if not _is_int(value):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {_shown(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {_shown(value)}")
    if value > MAX_INT:
        raise ValueError(f"{name} must be <= 2**63 - 1, got {_shown(value)}")
    return int(value)


def nonneg_int(name: str, value) -> int:
    return positive_int(name, value, minimum=0)


def _finite_real(name: str, value, *, strict: bool) -> float:
    kind = "positive" if strict else "non-negative"
    if not _is_real(value):
        raise ValueError(f"{name} must be a {kind} number, got {_shown(value)}")
    value = _as_float(value)
    if not math.isfinite(value) or value < 0 or (strict and value == 0):
        raise ValueError(f"{name} must be a {kind} finite number, got {value}")
    return value


def positive_float(name: str, value) -> float:
    return _finite_real(name, value, strict=True)


def nonneg_float(name: str, value) -> float:
    return _finite_real(name, value, strict=False)


def probability_open(name: str, value) -> float:
    if not _is_real(value):
        raise ValueError(f"{name} must be a number in (0, 1), got {_shown(value)}")
    value = _as_float(value)
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
    if not _is_real(value):
        raise ValueError(f"{name} must be a number in {shown}, got {_shown(value)}")
    try:
        value = float(value)
    except OverflowError:  # a huge int is no float, not even one of an interval up to inf
        raise ValueError(f"{name} must be in {shown}, got {_shown(value)}") from None
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

    arr = finite_array(name, orders, what="finite numbers > 1", finite=False)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty vector, got shape {arr.shape}")
    if not (np.isfinite(arr).all() and (arr > 1).all()):
        bad = arr[~(np.isfinite(arr) & (arr > 1))]
        raise ValueError(f"{name} must be finite numbers > 1, got {bad[:3]}")
    return arr


def finite_array(name: str, value, *, what: str = "finite numbers", finite: bool = True):
    """``value`` as a float64 numpy array, every entry finite (unless ``finite`` is false);
    a value that is no array of numbers (text, None, ragged lists, objects) is refused by
    ``name``, never with numpy's own message."""
    import numpy as np

    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be {what}, got {_shown(value)}") from None
    if finite and not np.isfinite(arr).all():
        raise ValueError(f"{name} must be {what}, got NaN or infinite values")
    return arr
