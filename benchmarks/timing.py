"""The statistics every benchmark table prints, defined once so their columns mean the same."""

from __future__ import annotations

import math
import statistics


def median(values: list[float]) -> float:
    """The middle time: what a typical request costs, unmoved by the odd slow one."""
    return statistics.median(values)


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile (a measured value, never interpolated)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
