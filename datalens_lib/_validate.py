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
