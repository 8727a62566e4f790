"""One contract for the three task forms (fn, command, app): every path of ablate, the same ablation, the same numbers.

Each form runs a tiny task that writes what it received (``seen.json``: the values of ``x``, ``y``, ``z`` and
the ``opt`` group it ran with), writes its seed to ``cwd.txt`` in its working dir (a relative path, as a
checkpoint is written), and returns ``score = x * (1 + seed / 100) + y + opt.k``; with ``poke`` set it also
writes next to its own source file, into the shared code snapshot, which must stop the ablation naming the
path. The matrix runs every form through every path (single ablation, resume, a suite of a key and a group
variable, a group variable, a transfer run, an interpolated treatment value, a dry run, repro, ``--against``,
``ablate verdict --curve`` on tasks that report one value (refused), a single run without ``-m``;
launcher=inline, and local with fresh and with warm trials), each with real
processes, and checks that every trial's relative write is in its own trial dir (``<trial dir>/work``) with
its own seed while the snapshot every trial shares is unchanged, and, for every treatment trial, that what
the task *received* differs from what the control trial of the same seed received in exactly the
treatment's own key: the one way to catch an arm that silently ran the control's config, or an override
built from the wrong variable. Where a combination cannot work yet, the refusal is asserted. The SLURM
cell (one job array) is ``tests/slurm/test_task_forms_slurm.py``.

Kept cheap: tiny tasks, 3 seeds (the fewest a verdict takes), each ablation run once per form and shared
by the cells that only read it, an app's warm trials in the cells not about a launcher (``OTHER_LAUNCHER``), and
no prepared data in the projects (``projects``: these tasks read none).
"""

from __future__ import annotations

import functools
import json
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ablate_cli, ablate_in, commit_all, run

pytestmark = pytest.mark.slow

FN = '''
import json
from pathlib import Path

def train(cfg):
    t = cfg.task
    seen = {"x": t.x, "y": t.y, "z": t.z, "opt": {"name": t.opt.name, "k": t.opt.k}}
    (Path(t.out) / "seen.json").write_text(json.dumps(seen))
    (Path(t.out) / "marker.txt").write_text(str(cfg.seed))
    Path("cwd.txt").write_text(str(cfg.seed))  # relative: into the working dir
    if t.poke:
        (Path(__file__).resolve().parent / "poked.txt").write_text(str(cfg.seed))  # into the code it runs from
    return {"score": t.x * (1 + cfg.seed / 100) + t.y + t.opt.k}
'''
COMMAND = '''
import json, os, sys

def value(text):  # the script's own reading of a Hydra override value: a quoted string or a number
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("\\\\'", "'")
    return float(text)

args = {k: value(v) for k, v in (a.split("=", 1) for a in sys.argv[1:]) if k != "poke"}
seen = {"x": args["x"], "y": args["y"], "z": args["z"], "opt": {"name": args["opt.name"], "k": args["opt.k"]}}
with open(os.path.join(os.environ["ABLATE_RUN_DIR"], "seen.json"), "w") as fh:
    json.dump(seen, fh)
score = args["x"] * (1 + int(args["seed"]) / 100) + args["y"] + args["opt.k"]
with open("cwd.txt", "w") as fh:  # relative: into the working dir
    fh.write(str(int(args["seed"])))
if "poke=true" in sys.argv:
    with open(os.path.join(os.path.dirname(os.path.realpath(__file__)), "poked.txt"), "w") as fh:
        fh.write("x")  # into the code it runs from
with open(os.environ["ABLATE_METRICS_FILE"], "w") as fh:
    json.dump({"score": score}, fh)
'''
APP = '''
import json
from pathlib import Path

import hydra


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg):
    seen = {"x": cfg.x, "y": cfg.y, "z": cfg.z, "opt": {"name": cfg.opt.name, "k": cfg.opt.k}}
    (Path(cfg.out) / "seen.json").write_text(json.dumps(seen))
    (Path(cfg.out) / "marker.txt").write_text(str(cfg.seed))
    Path("cwd.txt").write_text(str(cfg.seed))  # relative: into the working dir (hydra.job.chdir is false)
    if cfg.poke:
        (Path(__file__).resolve().parent / "poked.txt").write_text(str(cfg.seed))  # into the code it runs from
    return {"score": cfg.x * (1 + cfg.seed / 100) + cfg.y + cfg.opt.k}


if __name__ == "__main__":
    main()
'''
OPTS = {"a": {"name": "a", "k": 0.0}, "b": {"name": "b", "k": 2.0}}
VALUES = {"x": 1.0, "y": 0.0, "z": "plain", "poke": False}
#: Where each form's keys live in ablate's config: (key prefix, group prefix).
WHERE = {"fn": ("task.", "task/"), "command": ("task.params.", "task/params/"), "app": ("", "")}
INTERP = "${hydra:runtime.output_dir}/alt"
#: Each variable, and the keys of ``seen.json`` its treatment changes (and to what).
VARIABLES = {"vx": ("key", "x", [3.0], {"x": 3.0}),
             "vopt": ("group", "opt", ["b"], {"opt.name": "b", "opt.k": 2.0}),
             "vz": ("key", "z", [INTERP], {"z": "<run>/alt"})}
SEEDS = {"fn": [0, 1, 2], "command": [1, 2, 3], "app": [1, 2, 3]}  # a script seeds itself, from 1
LAUNCHERS = {"local-warm": ("launcher=local", "launcher.warm=true"),
             "local-fresh": ("launcher=local", "launcher.warm=false")}
#: The launcher of a cell about something else (resume, a transfer run): inline, but an app's warm trials. An app's
#: inline trial is a fresh ``python app.py`` process (about 0.7 s of CPU each, 8.1 s against 4.3 s for 6 trials); a
#: warm one is a fork of a parent that imported the app once. An app's inline path is proved by the suite, repro and
#: snapshot cells, its fresh and warm ones by the local cells.
OTHER_LAUNCHER = {"fn": ("launcher=inline",), "command": ("launcher=inline",), "app": LAUNCHERS["local-warm"]}


def setup(root: Path, form: str) -> None:
    """The three tasks, the ``opt`` group of each and the variables vx, vopt, vz, committed."""
    (root / "contract_fn.py").write_text(FN)
    (root / "contract_cmd.py").write_text(COMMAND)
    app = root / "contract_app"
    (app / "conf" / "opt").mkdir(parents=True)
    (app / "app.py").write_text(APP)
    (app / "conf" / "config.yaml").write_text(yaml.safe_dump(
        {"defaults": [{"opt": "a"}, "_self_"], **VALUES, "seed": 0, "out": "${hydra:runtime.output_dir}"},
        sort_keys=False))
    task = {"fn": {"defaults": [{"opt": "a"}, "_self_"], "fn": "contract_fn:train", **VALUES,
                   "out": "${hydra:runtime.output_dir}"},
            "command": {"defaults": [{"params/opt": "a"}, "_self_"], "command": "python contract_cmd.py",
                        "params": dict(VALUES), "output_dir_key": None},
            "app": {"app": "contract_app/app.py"}}[form]
    group_dir = {"fn": root / "conf" / "task" / "opt", "command": root / "conf" / "task" / "params" / "opt",
                 "app": app / "conf" / "opt"}[form]
    group_dir.mkdir(parents=True, exist_ok=True)
    for name, opt in OPTS.items():
        (group_dir / f"{name}.yaml").write_text(yaml.safe_dump(opt))
    (root / "conf" / "task" / "contract.yaml").write_text(yaml.safe_dump({**task, "metric": "score"}, sort_keys=False))
    key_prefix, group_prefix = WHERE[form]
    for name, (kind, key, values, _) in VARIABLES.items():
        path = (group_prefix if kind == "group" else key_prefix) + key
        (root / "conf" / "variable" / f"{name}.yaml").write_text(yaml.safe_dump({kind: path, "values": values}))
    commit_all(root, f"contract {form}")


def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def snapshot_unchanged(sd: Path, plan: dict[str, Any]) -> None:
    """The code snapshot every trial shares holds exactly the files listed at launch, with the pinned content."""
    from ablate.pin import digest, pins

    pin = plan["pins"]["code"]
    listed = (sd / pin["snapshot_files"]).read_text().splitlines()
    assert digest.list_files(sd / "code", skip=pins.snapshot_skip(pin)) == listed
    assert digest.digest(sd / "code", follow_symlinks=False, files=listed)["digest"] == pin["snapshot"]


def sweeps(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("outputs/ablate/**/ablation.yaml"))


class Project:
    """One form's project; each ablation runs once (on first use) and is shared by the cells that read it."""

    def __init__(self, root: Path, form: str) -> None:
        self.root, self.form = root, form
        setup(root, form)

    def ablate(self, *args: str, ok: bool = True, console: bool = False) -> Any:
        """``ablate ARGS`` through ablate's CLI entry in this process (the console script's exit code and output,
        without an interpreter start and ablate's imports: about 1.4 s of CPU a call), or through the console
        script when ``console`` (the cells that prove it: a single run and the fresh local trials)."""
        res = ablate_cli(self.root, *args, timeout=300) if console else ablate_in(self.root, *args)
        if ok:
            assert res.returncode == 0, f"ablate {shlex.join(args)}\n{res.stdout}\n{res.stderr}"
        return res

    def sweep(self, *args: str, console: bool = False) -> Path:
        """Run ``ablate -m task=contract seeds=3 <args>`` and return its new sweep (or transfer parent) dir."""
        before = set(self.root.glob("outputs/ablate/*/*"))
        self.ablate("-m", "task=contract", "seeds=3", *args, console=console)
        (new,) = set(self.root.glob("outputs/ablate/*/*")) - before
        return new

    @functools.cached_property
    def suite(self) -> Path:
        return self.sweep("variable=vx,vopt", "launcher=inline")


@pytest.fixture(scope="module")
def projects(project_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Project]:
    """Each form's project (made on first use): the template's git + DVC project without its prepared data
    (``data/``, git-ignored, DVC-tracked), which these tasks never read. A git-ignored file in the task's
    directory makes every ablation ask DVC which outputs it tracks (:func:`ablate.pin.ignored.find`; DVC's
    import, about 0.3-0.4 s of CPU an ablation, is proved in ``tests/integration/test_ignored_files.py``)."""
    made: dict[str, Project] = {}

    def get(form: str) -> Project:
        if form not in made:
            dest = tmp_path_factory.mktemp(f"contract_{form}") / "proj"
            shutil.copytree(project_template, dest, symlinks=True,
                            ignore=lambda d, names: ["data"] if Path(d) == project_template else [])
            made[form] = Project(dest, form)
        return made[form]

    return get


def check_sweep(sd: Path, form: str, *, y: float = 0.0) -> dict[str, Any]:
    """Every trial ran and its metric is the task's own; each treatment received control's config but its own key.

    Returns the plan record (``ablation.yaml``).
    """
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    seeds = SEEDS[form]
    assert plan["seeds"] == seeds
    verdict = json.loads((sd / "verdict.json").read_text())
    per_seed = {a["arm"]: a["values"] for a in verdict["arms"]}
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for arm in plan["arms"]:
        for seed in seeds:
            t = sd / "trials" / arm["name"] / f"seed={seed}"
            result = json.loads((t / "result.json").read_text())
            assert result["status"] == "ok", result
            got = json.loads((t / "run" / "seen.json").read_text())
            score = got["x"] * (1 + seed / 100) + got["y"] + got["opt"]["k"]
            assert result["metrics"]["score"] == per_seed[arm["name"]][str(seed)] == score
            manifest = json.loads((t / "manifest.json").read_text())
            assert manifest["seed"] == seed and manifest["config"]["seed"] == seed
            if form != "command":  # ${hydra:runtime.output_dir} is the trial's own run dir, on every launcher
                assert (t / "run" / "marker.txt").read_text() == str(seed)
            assert (t / "work" / "cwd.txt").read_text() == str(seed)  # its cwd is its own, on every launcher
            seen[arm["name"], seed] = flat(got)
    for seed in seeds:
        control = seen["control", seed]
        assert control == {"x": 1.0, "y": y, "z": "plain", "opt.name": "a", "opt.k": 0.0}, control
        for arm in plan["arms"][1:]:
            variable = arm.get("variable") or plan["variable"]["name"]
            run_dir = str(sd / "trials" / arm["name"] / f"seed={seed}" / "run")
            want = {k: v.replace("<run>", run_dir) if isinstance(v, str) else v
                    for k, v in VARIABLES[variable][3].items()}
            got = seen[arm["name"], seed]
            differs = {k: got[k] for k in got if got[k] != control[k]}
            assert differs == want, (f"{form}: treatment {arm['name']} (variable {variable}, seed {seed}) received "
                                     f"{differs} where the control's config differs only in {want}")
    assert verdict["confounds"]["findings"] == [], verdict["confounds"]
    snapshot_unchanged(sd, plan)
    return plan


FORMS = ["fn", "command", "app"]


@pytest.mark.parametrize("form", FORMS)
def test_single_ablation_then_resume(projects: Callable[[str], Project], form: str) -> None:
    p = projects(form)
    sd = p.sweep("variable=vx", *OTHER_LAUNCHER[form])
    check_sweep(sd, form)
    # resume: a lost treatment trial and a lost control trial run again, each with its own arm's config
    for arm in ("control", "x=3.0"):
        shutil.rmtree(sd / "trials" / arm / f"seed={SEEDS[form][1]}")
    res = p.ablate("resume", str(sd))
    ran = [x for x in res.stderr.splitlines() if x.startswith("[")]
    assert len(ran) == 2 and all(" ok in " in x for x in ran), res.stderr  # only the two lost trials ran
    check_sweep(sd, form)


@pytest.mark.parametrize("form", FORMS)
def test_suite_of_a_key_and_a_group(projects: Callable[[str], Project], form: str) -> None:
    p = projects(form)
    plan = check_sweep(p.suite, form)
    assert [(a["name"], a.get("variable")) for a in plan["arms"]] == [("control", None), ("x=3.0", "vx"),
                                                                      ("opt=b", "vopt")]
    # curves asked for after the run: these tasks report one value, so no trial kept a series: one line, nothing
    # written (the verdict on disk stays the one the suite wrote)
    before = (p.suite / "verdict.json").read_bytes()
    res = ablate_in(p.root, "verdict", str(p.suite), "--curve")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert "kept a series of 'score' against 'step'" in res.stderr and "curve.enabled=true" in res.stderr
    assert (p.suite / "verdict.json").read_bytes() == before and not (p.suite / "verdict_options.json").exists()


@pytest.mark.parametrize("form", FORMS)
def test_extend_a_suite_local_warm(projects: Callable[[str], Project], form: str) -> None:
    """`ablate extend` (issue 39) runs only the new seeds of every arm of a suite, each with its own arm's config."""
    p = projects(form)
    sd = p.sweep("variable=vx,vopt", *LAUNCHERS["local-warm"])
    res = p.ablate("extend", str(sd), "seeds=5")
    ran = [x for x in res.stderr.splitlines() if x.startswith("[")]
    assert len(ran) == 6 and all(" ok in " in x for x in ran), res.stderr  # 3 arms x 2 new seeds, nothing else
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    new = [SEEDS[form][-1] + 1, SEEDS[form][-1] + 2]
    assert plan["seeds"] == SEEDS[form] + new and plan["extension"]["stage2_seeds"] == new
    for seed in new:
        seen = {a["name"]: flat(json.loads((sd / "trials" / a["name"] / f"seed={seed}" / "run" / "seen.json")
                                           .read_text())) for a in plan["arms"]}
        for arm in plan["arms"][1:]:
            got = seen[arm["name"]]
            assert {k: got[k] for k in got if got[k] != seen["control"][k]} == VARIABLES[arm["variable"]][3]
    verdict = json.loads((sd / "verdict.json").read_text())
    assert all(c["extension"]["stage2"]["seeds"] == new for c in verdict["comparisons"])
    assert verdict["confounds"]["findings"] == [], verdict["confounds"]


# The two local modes each run a path of their own (OTHER_LAUNCHER runs the others): every launcher, every form.
@pytest.mark.parametrize("form", FORMS)
def test_group_variable_local_fresh(projects: Callable[[str], Project], form: str) -> None:
    check_sweep(projects(form).sweep("variable=vopt", *LAUNCHERS["local-fresh"], console=True), form)


@pytest.mark.parametrize("form", FORMS)
def test_interpolated_treatment_value_local_warm(projects: Callable[[str], Project], form: str) -> None:
    # the treatment's z is `${hydra:runtime.output_dir}/alt`: the task gets its own run dir + /alt, not the text
    check_sweep(projects(form).sweep("variable=vz", *LAUNCHERS["local-warm"]), form)


@pytest.mark.parametrize("form", FORMS)
def test_transfer_run_then_against(projects: Callable[[str], Project], form: str) -> None:
    p = projects(form)
    key = WHERE[form][0] + "y"
    # a group variable at each scale (the key variable runs in the other cells)
    parent = p.sweep("variable=vopt", f"scale.key={key}", "scale.values=[0.0,1.0]", *OTHER_LAUNCHER[form])
    children = yaml.safe_load((parent / "transfer.yaml").read_text())["children"]
    assert children == ["y=0.0", "y=1.0"]
    for child, y in zip(children, (0.0, 1.0), strict=True):
        check_sweep(parent / child, form, y=y)
    # an app's scale key names its own config (as a variable's key does), recorded at ablate's path for it
    assert json.loads((parent / "transfer.json").read_text())["scale"]["key"] == ("task.params.y" if form == "app"
                                                                                  else key)
    # --against: the scale y=1.0 as the target run; the one config difference named is the scale's key (an app's
    # scale value is one of its overrides, so `task.overrides` differs too)
    p.ablate("verdict", str(parent / children[0]), "--against", str(parent / children[1]), "--no-plots")
    against = json.loads((parent / children[0] / "verdict.json").read_text())["against"]
    want = {"fn": ["task.y"], "command": ["task.params.y"], "app": ["task.overrides", "task.params.y"]}[form]
    assert [(d["kind"], d["field"]) for d in against["differences"]] == [("config", k) for k in want], against
    assert against["differences"][-1]["this"] == 0.0 and against["differences"][-1]["target"] == 1.0


@pytest.mark.parametrize("form", FORMS)
def test_dry_run_shows_each_arm_its_own_change(projects: Callable[[str], Project], form: str) -> None:
    p = projects(form)
    res = p.ablate("-m", "task=contract", "seeds=3", "variable=vx,vopt", "dry_run=true")
    out = res.stdout
    key_prefix, _ = WHERE[form]
    params = "task.params." if form == "app" else key_prefix
    assert f"{params}x: 1.0 -> 3.0" in out and f"{params}opt.name: a -> b" in out, out
    # where a combination cannot work yet, ablate refuses it before anything is written, naming the way out
    scale = (f"scale.key={key_prefix}y", "scale.values=[1.0,2.0]")
    before = list(p.root.glob("outputs/ablate/*/*"))
    one = f"{'app.' if form == 'app' else key_prefix}y=1.0"  # an app's key is set with the app. prefix
    for args, words in ((("variable=vx", "dry_run=true", *scale),
                         f"`dry_run`: a transfer check has no dry run yet. Fix: dry-run one scale, without "
                         f"scale.key: `{one} dry_run=true`"),
                        (("variable=vx,vopt", *scale),
                         "`scale.key`: a suite cannot run a transfer check yet. Fix: run the transfer check per "
                         "variable: `ablate -m variable=<name> scale.key=...`"),
                        (("variable=vx", f"scale.key={key_prefix}yy", "scale.values=[1.0,2.0]"),
                         f"`scale.key`: '{key_prefix}yy' is not a value in the "
                         + ("app's config. Close matches: y" if form == "app" else
                            f"composed config. Close matches: {key_prefix}y"))):
        refused = p.ablate("-m", "task=contract", "seeds=3", *args, ok=False)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
    # the fix named works (in this process, as the refusals and the dry run above)
    fix = p.ablate("-m", "task=contract", "seeds=3", "variable=vx", one, "dry_run=true")
    assert "arms (2): control, x=3.0" in fix.stdout, fix.stdout
    assert form == "fn" or "y=1.0" in _dry_run_argvs(fix.stdout)["control"], fix.stdout
    assert list(p.root.glob("outputs/ablate/*/*")) == before
    if form == "fn":
        return  # an fn task has no argv: the changes above are what it receives
    argv = _dry_run_argvs(out)
    assert set(argv) == {"control", "x=3.0", "opt=b"}, out
    ctl = argv["control"]
    own = {"x=3.0": {"command": ["x=3.0"], "app": ["x=3.0"]}[form],
           "opt=b": {"command": ["opt.name='b'", "opt.k=2.0"], "app": ["opt=b"]}[form]}
    for arm, extra in own.items():
        added = [a for a in argv[arm] if a not in ctl]
        assert sorted(added) == sorted(extra), f"{arm}: {argv[arm]} vs control {ctl}"


def _dry_run_argvs(out: str) -> dict[str, list[str]]:
    """Each arm's argv as the dry run prints it: on its `argv ARM seed=S:` line, or (a long one) on the lines
    after it, one argument a line with shell continuations, as a shell reads them."""
    argvs: dict[str, list[str]] = {}
    lines = out.splitlines()
    for i, x in enumerate(lines):
        if not x.strip().startswith("argv "):
            continue
        arm, rest = x.split()[1], x.split(": ", 1)[1] if ": " in x else ""
        text = rest
        if not rest.strip():  # one argument a line follows
            parts = []
            for y in lines[i + 1:]:
                parts.append(y.strip().removesuffix("\\").strip())
                if not y.rstrip().endswith("\\"):
                    break
            text = " ".join(parts)
        argvs[arm] = shlex.split(text)
    return argvs


@pytest.mark.parametrize("form", FORMS)
def test_repro_of_a_suite_treatment(projects: Callable[[str], Project], form: str) -> None:
    p = projects(form)
    sd = p.suite
    seed = SEEDS[form][0]
    res = p.ablate("repro", str(sd), "--trial", f"opt=b/{seed}")
    assert "weak reproducibility (final metrics bitwise equal): holds" in res.stdout, res.stdout
    (again,) = sd.glob(f"repro/opt=b/seed={seed}/*/run/seen.json")
    original = json.loads((sd / "trials" / "opt=b" / f"seed={seed}" / "run" / "seen.json").read_text())
    assert json.loads(again.read_text()) == original and original["opt"] == OPTS["b"]
    assert run(["git", "status", "--porcelain"], p.root).stdout == ""


#: The override that makes each form's task write next to its own source file (into the shared snapshot).
POKE = {"fn": "task.poke=true", "command": "task.params.poke=true", "app": "app.poke=true"}


@pytest.mark.parametrize(("form", "launcher"), [("fn", "inline"), ("command", "inline"), ("app", "inline"),
                                                ("fn", "local-warm"), ("fn", "local-fresh")])
def test_a_write_into_the_shared_snapshot_stops_the_ablation_naming_it(projects: Callable[[str], Project], form: str,
                                                                      launcher: str) -> None:
    p = projects(form)
    before = set(p.root.glob("outputs/ablate/*/*"))
    args = LAUNCHERS.get(launcher, ("launcher=inline",))
    res = p.ablate("-m", "task=contract", "seeds=3", "variable=vx", POKE[form], *args, ok=False)
    (sd,) = set(p.root.glob("outputs/ablate/*/*")) - before
    written = sd / "code" / ("contract_app" if form == "app" else "") / "poked.txt"
    assert res.returncode == 2, res.stderr
    (line,) = [x for x in res.stderr.splitlines() if "shared code snapshot" in x and x.startswith("ablate: ")]
    assert f"wrote into the shared code snapshot, which every trial of the ablation reads: {written}" in line, line
    assert "Fix: write to a new path under the working dir" in line, line
    results = [json.loads(r.read_text()) for r in sd.glob("trials/*/seed=*/result.json")]
    failed = [r for r in results if r["status"] == "failed"]
    assert failed and all(str(written) in r["error"] for r in failed), results
    assert all(r["status"] == "interrupted" for r in results if r not in failed), results  # stopped, never ok


@pytest.mark.parametrize("form", FORMS)
def test_a_single_run_writes_into_its_own_dir_never_the_live_project(projects: Callable[[str], Project],
                                                                    form: str) -> None:
    p = projects(form)
    status = run(["git", "status", "--porcelain"], p.root).stdout
    before = set(p.root.glob("outputs/ablate/*/*"))
    p.ablate("task=contract", "seed=2", console=True)
    (out,) = set(p.root.glob("outputs/ablate/*/*")) - before
    assert json.loads((out / "result.json").read_text())["metrics"]["score"] == 1.02
    assert (out / "work" / "cwd.txt").read_text() == "2"  # its relative write, in its own dir
    assert not (p.root / "cwd.txt").exists()
    assert run(["git", "status", "--porcelain"], p.root).stdout == status


@pytest.mark.parametrize(("form", "warm"), [("fn", "true"), ("fn", "false"), ("command", "true"), ("app", "true")])
def test_tuned_ablation(projects: Callable[[str], Project], form: str, warm: str) -> None:
    """Tuning (issue 40) on every form, local warm (and, for fn, fresh) trials: each arm runs every setting of ``y`` on
    the tuning seeds, then its chosen setting on the evaluation seeds; every trial received its arm's ``x`` and its
    setting's ``y``."""
    p = projects(form)
    key = WHERE[form][0] + "y"
    full = "task.params.y" if form == "app" else key  # an app's own key, as the plan names it
    sd = p.sweep("variable=vx", "launcher=local", f"launcher.warm={warm}", f"tune.key={key}", "tune.values=[0.0,0.5]",
                 "tune.seeds=1")
    plan = yaml.safe_load((sd / "ablation.yaml").read_text())
    assert plan["tuning"]["eval_seeds"] == SEEDS[form] and plan["seeds"] == [SEEDS[form][-1] + 1]
    chosen = json.loads((sd / "tuning.json").read_text())["chosen"]
    assert chosen == {"control": "control+y=0.5", "x=3.0": "x=3.0+y=0.5"}  # score grows with y
    trials = [(a, plan["seeds"][0], a.get("setting")) for a in plan["arms"]]
    trials += [(a, s, a["setting"]) for a in plan["arms"] if a["name"] in chosen.values() for s in SEEDS[form]]
    for arm, seed, setting in trials:
        t = sd / "trials" / arm["name"] / f"seed={seed}"
        assert json.loads((t / "result.json").read_text())["status"] == "ok"
        got = json.loads((t / "run" / "seen.json").read_text())
        assert got["y"] == setting[full] and got["x"] == (3.0 if arm["base"] == "x=3.0" else 1.0), (arm["name"], got)
    verdict = json.loads((sd / "verdict.json").read_text())
    assert [a["arm"] for a in verdict["arms"]] == ["control+y=0.5", "x=3.0+y=0.5"]
    assert verdict["confounds"]["findings"] == [], verdict["confounds"]
    assert [a["setting"] for a in verdict["tuning"]["arms"]] == [{full: 0.5}, {full: 0.5}]


def test_tuned_suite_inline(projects: Callable[[str], Project]) -> None:
    """A suite (a key and a group variable) tuned, fn task, inline: one shared control, each arm at its own choice,
    each treatment proved to differ in its own variable (and the tuned key) only."""
    sd = projects("fn").sweep("variable=vx,vopt", "launcher=inline", "tune.key=task.y", "tune.values=[0.0,0.5]",
                              "tune.seeds=1")
    chosen = json.loads((sd / "tuning.json").read_text())["chosen"]
    assert chosen == {"control": "control+y=0.5", "x=3.0": "x=3.0+y=0.5", "opt=b": "opt=b+y=0.5"}
    verdict = json.loads((sd / "verdict.json").read_text())
    assert [c["arm"] for c in verdict["comparisons"]] == ["x=3.0+y=0.5", "opt=b+y=0.5"]
    assert [c["variable"] for c in verdict["comparisons"]] == ["vx", "vopt"]
    assert verdict["confounds"]["findings"] == [] and not verdict["invalid"], verdict["invalid_reasons"]
    for arm in chosen.values():
        for seed in SEEDS["fn"]:
            got = json.loads((sd / "trials" / arm / f"seed={seed}" / "run" / "seen.json").read_text())
            assert got["y"] == 0.5
