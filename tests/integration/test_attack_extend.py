"""``ablate extend`` with odd ``seeds=`` (the 2026-12-03 attack): a K whose new seeds would not fit in 32 bits, and
``seeds=`` given twice, are refused in one line with the fix before anything is recorded. Synthetic sweep dirs
(:func:`tests.helpers.make_sweep`: these refusals come before the pins are checked), ablate's CLI entry called in
this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ablate_in, make_sweep

VALUES = {"control": [0.80, 0.81, 0.82], "lr=0.1": [0.85, 0.86, 0.87]}


@pytest.mark.parametrize("k", ["99999999999999999999", "4294967297"])
def test_seeds_past_32_bits_are_refused(tmp_path: Path, k: str) -> None:
    sd = make_sweep(tmp_path / "sd", VALUES)
    before = (sd / "ablation.yaml").read_bytes()
    res = ablate_in(tmp_path, "extend", str(sd), f"seeds={k}")
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    # seeds 0..2 ran: the new ones would be 3..K-1, and a seed is at most 2**32 - 1 = 4294967295
    assert f"`seeds`: seeds={k} would run seeds up to {int(k) - 1}, past 4294967295" in line, line
    assert f"Fix: give at most 4294967296, e.g. `ablate extend {sd} seeds=6`" in line, line
    assert (sd / "ablation.yaml").read_bytes() == before


@pytest.mark.parametrize("args", [("seeds=6", "seeds=7"), ("seeds=6", "seeds=6")])
def test_seeds_given_twice_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    sd = make_sweep(tmp_path / "sd", VALUES)
    res = ablate_in(tmp_path, "extend", str(sd), *args)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"`ablate extend`: `seeds=` is given twice ({args[0]}, {args[1]})" in line, line
    assert "Fix: give it once: `ablate extend DIR seeds=K`" in line, line
