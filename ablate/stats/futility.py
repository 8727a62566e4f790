"""Non-binding futility stops for group-sequential looks: conditional power under the planned effect (issue 39).

At a look before the last, a treatment whose conditional power under the planned effect is below
:data:`FUTILITY_CP` stops "for futility": even if the true effect is the one the plan named, the last look would
probably not cross its boundary. Stochastic curtailment (Lan, Simon & Halperin 1982, Communications in Statistics C
1(3), 207-219); conditional power under the design alternative (Lachin 2005, Clinical Trials 2(3), 277-285;
Jennison & Turnbull 2000, ch. 10). Non-binding: the efficacy boundaries are computed as if futility never stopped an
arm (:func:`ablate.stats.sequential.boundaries` knows nothing of it), so α is kept whether a futility stop is obeyed
or not; a futility stop only removes chances to reject.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ablate.stats import _iv

#: Conditional power under the planned effect below which a treatment stops for futility (γ; Lachin 2005 uses
#: 0.10-0.20). 0.10: in the issue-39 suite (benchmarks/sequential_futility.py) it keeps each treatment's power at
#: least 0.95x that of fixed N.
FUTILITY_CP = 0.10


def conditional_power(z: Any, fraction: Any, drift: Any, z_final: float) -> np.ndarray:
    """P(|Z| at the last look >= ``z_final`` | the look's z), under the planned effect in the direction of z.

    Parameters
    ----------
    z : array_like
        |Z| at the look (the two-sided p converted, Φ⁻¹(1 - p/2)).
    fraction : array_like
        Information fraction t of the look, in (0, 1).
    drift : array_like
        E[Z] at the last look under the planned effect (θ √I_max, :func:`planned_drift`), >= 0.
    z_final : float
        The last look's efficacy boundary (a z).

    Returns
    -------
    numpy.ndarray
        1 - Φ((z_final - |z| √t - drift (1 - t)) / √(1 - t)); NaN where an input is NaN.

    Notes
    -----
    Brownian-motion (B-value) form: B(t) = Z_t √t, B(1) - B(t) ~ N(θ (1 - t), 1 - t) (Lan & Wittes 1988,
    Biometrics 44, 579-585). Both directions count: the larger of the two conditional powers, that of the observed
    sign (the other is smaller whenever |z| > 0), so a treatment heading for a firm `worse` is not stopped for
    futility.
    """
    from scipy.stats import norm  # noqa: PLC0415  # lazy: scipy loads only where a function needs it

    zz, t, d = np.broadcast_arrays(np.abs(np.asarray(z, float)), np.asarray(fraction, float), np.asarray(drift, float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return norm.sf((float(z_final) - zz * np.sqrt(t) - d * (1 - t)) / np.sqrt(1 - t))


def planned_drift(effect: float, sd: Any, se: Any, fraction: Any) -> np.ndarray:
    """E[Z] at the last look under the planned effect: effect x SD / (SE at the look x √t).

    Parameters
    ----------
    effect : float
        The planned effect in SDs of one seed's metric (Δ / σ), > 0.
    sd : array_like
        σ̂, one seed's SD: the two arms' pooled SD at the look, √((s_T² + s_C²) / 2), metric units.
    se : array_like
        The SE of Δ̂ at the look (Welch or paired, as the look tests), metric units.
    fraction : array_like
        Information fraction of the look: the last look's SE is se √t (information ∝ 1 / SE²).

    Returns
    -------
    numpy.ndarray
        NaN where the SE is 0 or NaN (such a look never stops for futility).
    """
    e = float(effect)
    if not e > 0:
        raise _iv.fail("effect", "must be a positive number of SDs", effect)
    s, se_, t = np.broadcast_arrays(np.asarray(sd, float), np.asarray(se, float), np.asarray(fraction, float))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # inf (a huge effect): NaN, no stop
        out = e * s / (se_ * np.sqrt(t))
    return np.where(np.isfinite(out) & (se_ > 0), out, np.nan)


def pooled_sd_rows(treatment: np.ndarray, control: np.ndarray) -> np.ndarray:
    """√((s_T² + s_C²) / 2) per row of (batch, n) arrays, NaN skipped (ddof 1); NaN with fewer than 2 values."""
    def var(x: np.ndarray) -> np.ndarray:
        n = (~np.isnan(x)).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = np.nansum(x, 1) / n
            return np.where(n >= 2, np.nansum((x - mu[:, None]) ** 2, 1) / (n - 1), np.nan)

    return np.sqrt((var(treatment) + var(control)) / 2)


def futile(pvalue: Any, se: Any, sd: Any, fraction: Any, *, effect: float, z_final: float,
           threshold: float = FUTILITY_CP) -> tuple[np.ndarray, np.ndarray]:
    """Whether a look stops each row for futility, and its conditional power.

    Parameters
    ----------
    pvalue : array_like
        The look's two-sided p (Welch or paired t).
    se, sd, fraction :
        As in :func:`planned_drift`.
    effect : float
        The planned effect (SDs of one seed's metric).
    z_final : float
        The last look's efficacy boundary.
    threshold : float
        γ in (0, 1): stop when the conditional power is below it.

    Returns
    -------
    (numpy.ndarray of bool, numpy.ndarray of float)
        Stop, and the conditional power (NaN where it cannot be computed: no stop).
    """
    from scipy.stats import norm  # noqa: PLC0415  # lazy: scipy loads only where a function needs it

    g = float(threshold)
    if not 0 < g < 1:
        raise _iv.fail("threshold", "must lie in (0, 1)", threshold)
    z = norm.isf(np.clip(np.asarray(pvalue, float), 1e-300, 1) / 2)
    cp = conditional_power(z, fraction, planned_drift(effect, sd, se, fraction), z_final)
    return np.nan_to_num(cp, nan=1.0) < g, cp
