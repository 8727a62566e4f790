"""Pairing by design: match a treatment's trials to the control's by seed id (verdict spec B6)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ablate.stats import _iv

PAIRING = ("auto", "paired", "unpaired")


@dataclass(frozen=True)
class Pairing:
    """The arrays to compare and how they were matched.

    Attributes
    ----------
    paired : bool
        Whether the comparison is paired (a design decision: never chosen by which p is smaller).
    treatment, control : numpy.ndarray
        Values (NaN = failed trial). Paired: aligned by ``seeds`` (same length). Unpaired: every
        finished trial of each arm.
    seeds : tuple of int
        The shared seed ids (paired), or () when unpaired.
    unmatched : int
        Finished trials left out of the paired analysis because the other arm has no trial at that seed.
    reason : str
        Why paired or unpaired, for the report.
    """

    paired: bool
    treatment: np.ndarray
    control: np.ndarray
    seeds: tuple[int, ...]
    unmatched: int
    reason: str


def _pair_iv(treatment: Any, control: Any, pairing: Any) -> tuple[dict[int, float], dict[int, float], str]:
    mode = _iv.choice(pairing, "pairing", PAIRING)
    out = []
    for name, arm in (("treatment", treatment), ("control", control)):
        if not isinstance(arm, Mapping):
            raise _iv.fail(name, "must map seed id -> value (NaN for a failed trial)", arm)
        d: dict[int, float] = {}
        for k, v in arm.items():
            if isinstance(k, bool) or not isinstance(k, int | np.integer):
                raise _iv.fail(name, "must have integer seed ids as keys", k)
            fv = float(v) if v is not None else math.nan
            if math.isinf(fv):
                raise _iv.fail(name, "must not contain inf (a diverged trial is NaN)", v)
            d[int(k)] = fv
        out.append(d)
    return out[0], out[1], mode


def pair_by_seed(treatment: Mapping[int, float], control: Mapping[int, float], *,
                 pairing: str = "auto") -> Pairing:
    """Decide paired vs unpaired from the design, and align the arms by seed id.

    Parameters
    ----------
    treatment, control : mapping of int -> float
        Seed id -> metric value of every finished trial (NaN or None for a failed one). Pending trials
        are simply absent.
    pairing : {"auto", "paired", "unpaired"}
        ``auto`` pairs when the two arms ran a common seed list (at least 3 seed ids in common): the
        design is paired before any outcome is seen. ``paired`` pairs whatever seeds the arms share (seeds
        without a partner are dropped and counted); both fall back to unpaired on all runs below 3 shared
        seeds. ``unpaired`` never pairs.

    Returns
    -------
    Pairing

    Raises
    ------
    StatsInputError
        When an arm is not a seed -> value mapping or ``pairing`` is unknown.

    Notes
    -----
    Common random numbers (verdict spec A7, B6): Var(Δ̂) = 2σ²(1-ρ)/N paired vs 2σ²/N unpaired. Pairs with
    a failed member are dropped inside :func:`ablate.stats.compare` (and counted there); fewer than 3
    complete pairs fall back to the unpaired analysis of all runs.
    """
    t, c, mode = _pair_iv(treatment, control, pairing)
    common = [s for s in t if s in c]
    if mode == "unpaired" or len(common) < 3:
        why = "pairing=unpaired" if mode == "unpaired" else \
            f"the arms share {len(common)} seed ids (< 3): unpaired analysis of all runs"
        return Pairing(False, np.array(list(t.values()), float), np.array(list(c.values()), float), (), 0, why)
    unmatched = len(t) + len(c) - 2 * len(common)
    why = "paired by seed id (every arm ran the same seed list)" if unmatched == 0 else \
        f"paired by seed id; {unmatched} trial(s) without a partner seed left out"
    return Pairing(True, np.array([t[s] for s in common], float), np.array([c[s] for s in common], float),
                   tuple(common), unmatched, why)
