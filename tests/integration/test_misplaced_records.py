"""Attack (issue 35, item 11): a finished trial's result.json copied into another seed's or arm's dir. Its own
digest matches, so only its ``arm``/``seed`` against the dir it sits in can tell: such a trial is not finished,
every reader says so in one warning, and ``ablate resume`` re-runs it (the copy kept in its attempts/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.issue35 import inside, plain_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def done(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import ablate

    proj = plain_project(project_template, tmp_path_factory.mktemp("misplaced") / "proj")
    with inside(proj):
        verdict = ablate.run(proj / "conf", variable="mode", seeds=3, launcher="inline",
                             overrides=["task=plain", "progress=off"])
    return Path(verdict.sweep_dir)


def _copy(sd: Path, src: tuple[str, int], dst: tuple[str, int]) -> Path:
    a = sd / "trials" / src[0] / f"seed={src[1]}" / "result.json"
    b = sd / "trials" / dst[0] / f"seed={dst[1]}" / "result.json"
    shutil.copy2(a, b)
    return b


# (copied from, into): another seed of the same arm, the same seed of another arm, both differing
CASES = [(("control", 0), ("control", 2)), (("mode=b", 1), ("control", 1)), (("control", 2), ("mode=b", 0))]


@pytest.mark.parametrize(("src", "dst"), CASES)
def test_a_copied_record_is_not_finished_and_every_reader_says_so(done: Path, src: tuple[str, int],
                                                                   dst: tuple[str, int]) -> None:
    from ablate.orchestrate.status import format_status
    from ablate.record.results import collect, trial_state
    from ablate.record.sweepdir import SweepDir

    sd = SweepDir.open(done)
    original = (done / "trials" / dst[0] / f"seed={dst[1]}" / "result.json").read_bytes()
    copy = _copy(done, src, dst)
    try:
        assert sd.read_result(*dst) is None
        assert trial_state(sd, *dst) == ("interrupted", None)
        row = next(r for r in collect(sd, sd.plan()) if (r["arm"], r["seed"]) == dst)
        assert row["status"] == "interrupted" and "val_acc" not in row
        status = format_status(sd)
        line = f"trials/{dst[0]}/seed={dst[1]}/result.json records arm {src[0]!r} seed {src[1]}, not this trial"
        assert line in status and f"`ablate resume {done}` moves each to its trial's attempts/" in status
    finally:
        copy.write_bytes(original)


def test_resume_reruns_the_trial_whose_record_was_copied_in(done: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ablate.orchestrate.pipeline import execute
    from ablate.record.sweepdir import SweepDir

    dst = done / "trials" / "mode=b" / "seed=2"
    own = json.loads((dst / "result.json").read_text())
    _copy(done, ("control", 0), ("mode=b", 2))
    verdict = execute(SweepDir.open(done), out=lambda s: None)
    err = capsys.readouterr().err
    assert "trials/mode=b/seed=2/result.json records arm 'control' seed 0, not this trial" in err
    rec = json.loads((dst / "result.json").read_text())
    assert (rec["arm"], rec["seed"], rec["status"], rec["attempt"]) == ("mode=b", 2, "ok", 2)
    assert rec["metrics"] == own["metrics"] == {"val_acc": 0.5 + 2 * 0.01 + 0.02}
    aside = json.loads((dst / "attempts" / "1" / "result.json").read_text())
    assert (aside["arm"], aside["seed"]) == ("control", 0)
    assert verdict is not None and {a["arm"]: a["n"] for a in verdict["arms"]} == {"control": 3, "mode=b": 3}
    assert not any(f.get("trials") for f in verdict["confounds"]["findings"] if f["kind"] == "record")
