"""Failed trials: counted per arm, and a test of differential failure rate (verdict spec B1)."""

from __future__ import annotations

from dataclasses import dataclass

from ablate.stats import _iv


@dataclass(frozen=True)
class FailureFinding:
    """Failure counts of a treatment and the control.

    Attributes
    ----------
    failed_treatment, total_treatment, failed_control, total_control : int
        Failed trials and all finished trials (completed + failed) per arm.
    pvalue : float or None
        Two-sided Fisher exact p-value on the 2x2 table (failed / completed by arm) when the counts
        differ; None when they are equal (nothing to test).
    odds_ratio : float or None
        The sample odds ratio from the same call.
    """

    failed_treatment: int
    total_treatment: int
    failed_control: int
    total_control: int
    pvalue: float | None
    odds_ratio: float | None

    @property
    def differs(self) -> bool:
        """Whether the failure counts differ between the arms (so Fisher's test was run)."""
        return self.pvalue is not None

    def message(self) -> str:
        """One sentence: counts, and Fisher's p when the counts differ."""
        s = (f"failed trials: treatment {self.failed_treatment}/{self.total_treatment}, "
             f"control {self.failed_control}/{self.total_control}")
        if self.pvalue is not None:
            s += f"; Fisher exact p = {self.pvalue:.3g} (survivorship: the completed seeds may differ in kind)"
        return s


def failure_finding(failed_treatment: int, total_treatment: int, failed_control: int,
                    total_control: int) -> FailureFinding:
    """Compare the failure rates of a treatment and the control.

    Parameters
    ----------
    failed_treatment, total_treatment : int
        Failed and finished trials (completed + failed) of the treatment; 0 <= failed <= total.
    failed_control, total_control : int
        The same for the control.

    Returns
    -------
    FailureFinding

    Raises
    ------
    StatsInputError
        When a count is negative or failed exceeds total.

    Notes
    -----
    Fisher (1922); ``scipy.stats.fisher_exact([[f_T, n_T - f_T], [f_C, n_C - f_C]])``. Run only when the
    failure counts differ: a treatment that fails more often leaves a survivor-biased sample.
    """
    from scipy.stats import fisher_exact  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    ft = _iv.positive_int(failed_treatment, "failed_treatment", lo=0)
    nt = _iv.positive_int(total_treatment, "total_treatment", lo=0)
    fc = _iv.positive_int(failed_control, "failed_control", lo=0)
    nc = _iv.positive_int(total_control, "total_control", lo=0)
    if ft > nt:
        raise _iv.fail("failed_treatment", f"must be <= `total_treatment` ({nt})", ft)
    if fc > nc:
        raise _iv.fail("failed_control", f"must be <= `total_control` ({nc})", fc)
    p = odds = None
    if (ft, nt) != (fc, nc) and ft + fc > 0 and nt > 0 and nc > 0:
        res = fisher_exact([[ft, nt - ft], [fc, nc - fc]])
        p, odds = float(res.pvalue), float(res.statistic)
    return FailureFinding(ft, nt, fc, nc, p, odds)
