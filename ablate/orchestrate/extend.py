"""``ablate extend DIR seeds=K``: run seeds N+1..K of every arm into the same sweep dir, as stage 2 of a two-stage
adaptive design (issue 39).

The extension is refused, in one line with its fix, before anything is written when it could not keep the
verdict valid: fewer seeds than done, a second extension, a sequential run (its looks were planned before any
trial), unfinished trials, or pins that no longer hold (the project's code, the code snapshot, the data, the
environment). Otherwise the look is recorded in ``ablation.yaml`` (``extension``: the time, each treatment's
verdict and p at the look, the stage-1 and stage-2 seeds and the weights, fixed from N alone), the new seeds are
appended to the plan's seed list, and :func:`ablate.orchestrate.pipeline.execute` runs them as it runs any
pending trial: a kill is finished by ``ablate resume DIR`` (or the same ``ablate extend`` again) and loses no
finished trial. The verdict then combines the stages (:mod:`ablate.judge.extension`).
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ablate.errors import ConfigError, PinError, SweepDirError
from ablate.judge.extension import EXTENSION_KEY
from ablate.pin import pins as pins_mod
from ablate.plan.arms import MAX_SEED, MAX_SEEDS, too_many_seeds
from ablate.record.results import without_result
from ablate.record.sweepdir import PLAN_FILE, TRIALS_DIR, SweepDir, dump_yaml, write_atomic

#: A git commit id as a pin records it (hex); anything else read from a sweep dir is never shown as a command.
_COMMIT = re.compile(r"[0-9a-f]{7,64}")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv: list[str]) -> tuple[str, int]:
    """``DIR seeds=K`` -> (DIR, K); every other word refused in one line.

    Raises
    ------
    ConfigError
        No DIR, no ``seeds=K``, K not an integer, a selection of arms (an extension runs every arm), or an
        unknown word.
    """
    usage = "`ablate extend DIR seeds=K` (K: the seeds per arm in all, more than the ablation has)"
    setting = re.compile(r"[A-Za-z_][\w.]*=")  # `seeds=10`; a path holding `=` (an arm's dir `lr=0.2`) is no setting
    dirs = [a for a in argv if not setting.match(a) and not a.startswith("-")]
    pairs = [a.split("=", 1) for a in argv if setting.match(a)]
    sets = dict(pairs)
    twice = [k for k in sets if [p[0] for p in pairs].count(k) > 1]
    if twice:  # `seeds=6 seeds=7` took the last one without a word
        given = ", ".join(a for a in argv if a.startswith(f"{twice[0]}="))
        raise ConfigError(f"`{twice[0]}=` is given twice ({given})", where="ablate extend",
                          fix=f"give it once: {usage}")
    flags = [a for a in argv if a.startswith("-") and not setting.match(a)]
    if flags and flags != ["--help"] and flags != ["-h"]:
        raise ConfigError(f"unknown option {flags[0]}", where="ablate extend", fix=f"use {usage}")
    arms = [k for k in sets if k in ("arm", "arms", "variable", "treatment", "treatments")]
    if arms:
        raise ConfigError(f"`{arms[0]}=` asks for an extension of some arms only; an extension runs the new seeds of "
                          "every arm (the control's are every treatment's comparison, and the family's correction "
                          "covers all treatments)", where="ablate extend",
                          fix=f"drop `{arms[0]}=...`: {usage}")
    unknown = [k for k in sets if k != "seeds"]
    if unknown:
        raise ConfigError(f"`{unknown[0]}=` is not a setting of ablate extend (an extension keeps every setting of the "
                          "ablation)", where="ablate extend", fix=f"use {usage}")
    if len(dirs) != 1 or "seeds" not in sets:
        raise ConfigError("needs one sweep dir and `seeds=K`", where="ablate extend",
                          fix=f"use {usage}, e.g. `ablate extend outputs/ablate/<date>/<time>_<variable> seeds=10`")
    try:
        k = int(sets["seeds"])
    except ValueError:
        raise ConfigError(f"seeds={sets['seeds']} is not a number of seeds per arm", where="seeds",
                          fix=f"use {usage}") from None
    return dirs[0], k


def open_extendable(path: str) -> SweepDir:
    """The sweep dir at ``path``; an arm's or a trial's dir inside one, or a transfer check, is refused."""
    p = Path(path)
    parents = [d for d in p.absolute().parents if (d / PLAN_FILE).is_file()]
    if not (p / PLAN_FILE).is_file() and parents and (p.absolute().is_relative_to(parents[0] / TRIALS_DIR)):
        raise ConfigError(f"{path} is one arm's (or trial's) dir of the ablation in {parents[0]}; an extension runs "
                          "the new seeds of every arm, never of one", where="DIR",
                          fix=f"extend the whole ablation: `ablate extend {parents[0]} seeds=K`")
    from ablate.orchestrate.transfer import is_transfer_dir  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import

    if is_transfer_dir(path):
        raise ConfigError(f"{path} is a transfer check (one ablation per scale); each scale's seeds are planned "
                          "together", where="DIR", fix="extend one scale's sweep dir (`ablate status DIR` lists them), "
                          "or run the transfer check again with more seeds")
    return SweepDir.open(path)


def next_seeds(seeds: list[int], k: int) -> list[int]:
    """The seeds that bring ``seeds`` to ``k`` per arm: the next integers after the largest."""
    top = max(seeds) if seeds else -1
    return list(range(top + 1, top + 1 + k - len(seeds)))


def check_extension(sd: SweepDir, plan: Mapping[str, Any], k: int) -> str | None:
    """Refuse an extension the verdict could not judge validly; ``"resume"`` when this very extension was
    recorded and left unfinished (killed): it is then finished, not recorded again.

    Raises
    ------
    ConfigError, SweepDirError
        One line naming the reason and the fix.
    """
    opts = plan.get("options") or {}
    n = len(plan["seeds"])
    ext = plan.get(EXTENSION_KEY)
    if opts.get("sequential", "off") == "group":
        raise ConfigError("this ablation is sequential (sequential=group): its looks and the α each spends were fixed "
                          "before any trial, so seeds added after them would spend α a second time", where="seeds",
                          fix="start a new ablation with a later last look (`looks=[...]` ending at the N you want)")
    if plan.get("tuning"):  # issue 40: `seeds` are the tuning seeds there, and each arm's choice was made on them
        raise ConfigError("this ablation is tuned (`tune`): each arm's setting was chosen on its tuning seeds and "
                          "judged on evaluation seeds fixed before any trial; the two-stage test of an extension is "
                          "not built for that design yet", where="seeds",
                          fix="start a new tuned ablation with more evaluation seeds (the Next line of verdict.md "
                          "gives the command; its Tuning section says what it costs)")
    if isinstance(ext, Mapping):
        to = len(ext.get("stage1_seeds") or []) + len(ext.get("stage2_seeds") or [])
        if k == to and without_result(sd, dict(plan))[1]:
            return "resume"
        n1 = len(ext.get("stage1_seeds") or [])
        raise ConfigError(f"this ablation was extended already (from {n1} to {to} seeds per arm); the combination "
                          "test has two stages, and a third would need its weight fixed "
                          "before the first look", where="seeds",
                          fix=f"`ablate resume {sd.root}` finishes this extension; for more seeds, start a new "
                          "ablation with seeds=K")
    if k <= n:
        raise ConfigError(f"seeds={k} is not more than the {n} seeds per arm this ablation has; an extension only "
                          "adds seeds", where="seeds",
                          fix=f"give more than {n}, e.g. `ablate extend {sd.root} seeds={2 * n}`")
    if k - n < 2:
        raise ConfigError(f"seeds={k} adds one seed per arm; the second stage is tested on its own seeds and needs at "
                          "least 2 per arm", where="seeds", fix=f"`ablate extend {sd.root} seeds={n + 2}` or more")
    if k > MAX_SEEDS:
        raise too_many_seeds(k, f"e.g. `ablate extend {sd.root} seeds={2 * n}`")
    top = max((int(s) for s in plan["seeds"]), default=-1)
    if top + k - n > MAX_SEED:  # the new seeds are top+1..top+k-n (a huge K was an OverflowError)
        raise ConfigError(f"seeds={k} would run seeds up to {top + k - n}, past {MAX_SEED} (numpy and torch take "
                          "32-bit seeds)", where="seeds",
                          fix=f"give at most {n + MAX_SEED - top}, e.g. `ablate extend {sd.root} seeds={2 * n}`")
    left = without_result(sd, dict(plan))[1]
    if left:
        raise SweepDirError(f"{left} planned trial(s) of {sd.root} have no result yet; the look that decides an "
                            "extension needs every planned trial", where="ablate extend",
                            fix=f"finish them first with `ablate resume {sd.root}`, then extend")
    _check_code_moved(sd, plan)
    _check_environment(plan)
    return None


def project_of(sd: SweepDir, plan: Mapping[str, Any]) -> str | None:
    """The project a sweep dir belongs to: the git work tree it sits in (a sweep dir is written inside its project,
    and a copied project carries its sweep dirs), else the directory the plan was made in; None when neither is."""
    try:
        return str(pins_mod.git_root(sd.root))
    except PinError:
        cwd = (plan.get("project") or {}).get("cwd")
        return cwd if isinstance(cwd, str) and Path(cwd).is_dir() else None


def _check_code_moved(sd: SweepDir, plan: Mapping[str, Any]) -> None:
    """The project's code (its commit, and uncommitted changes) as pinned: the extension's trials run the pinned
    snapshot, and a project that moved on would make the verdict's stages differ from what the user now runs."""
    pin = (plan.get("pins") or {}).get("code") or {}
    cwd = project_of(sd, plan)
    if not pin.get("commit") or cwd is None:
        return
    now = pins_mod.pin_code(cwd, allow_dirty=True)
    pinned = str(pin["commit"])[:12]
    if now["commit"] != pin["commit"]:
        # the pinned id is read from the sweep dir (a record): named as a command only when it is a commit id
        checkout = (f"`git checkout {pinned}` in {shlex.quote(cwd)}" if _COMMIT.fullmatch(str(pin["commit"]))
                    else "check out the pinned commit")
        raise PinError(f"the project's code is at commit {now['commit'][:12]}, the ablation pinned {pinned}: the "
                       "new seeds would run the old snapshot while your tree has moved on, so stage 2 would not test "
                       "the code you have", where="code pin",
                       fix=f"{checkout} and extend, or start a new ablation on the new code")
    if sorted(now.get("dirty_files") or []) != sorted(pin.get("dirty_files") or []):
        changed = sorted(set(now.get("dirty_files") or []) ^ set(pin.get("dirty_files") or []))
        raise PinError(f"the project's uncommitted changes differ from those pinned ({', '.join(changed[:5])}): the "
                       "new seeds would run the pinned snapshot, not these edits", where="code pin",
                       fix=f"restore the tree as pinned (`git diff` shows what changed since commit {pinned}), or "
                       "commit and start a new ablation")


def _check_environment(plan: Mapping[str, Any]) -> None:
    """The launching environment (Python and the pinned packages) as at launch: stage 2's trials inherit it."""
    env = (plan.get("pins") or {}).get("environment") or {}
    if not env:
        return
    now = pins_mod.capture_environment(light=True)
    diffs = []
    if env.get("python") and now.get("python") != env["python"]:
        diffs.append(f"python {now.get('python')} (pinned {env['python']})")
    for name, version in sorted((env.get("packages") or {}).items()):
        got = (now.get("packages") or {}).get(name)
        if got != version:
            diffs.append(f"{name} {got or 'not installed'} (pinned {version})")
    if diffs:
        pkgs = " ".join(f"{n}=={v}" for n, v in sorted((env.get("packages") or {}).items())
                        if (now.get("packages") or {}).get(n) != v)
        raise PinError("the environment differs from the one the ablation was launched in: " + ", ".join(diffs[:5])
                       + "; stage 2 would run in another environment than stage 1", where="environment",
                       fix=(f"`pip install {pkgs}` (the pinned versions)" if pkgs else "use the pinned Python")
                       + ", or start a new ablation in this environment")


def look_record(sd: SweepDir) -> dict[str, dict[str, Any]]:
    """Each treatment at the look: its verdict, p and adjusted p as the fixed-N verdict gives them now."""
    from ablate.judge.verdict import write_verdict  # noqa: PLC0415  # lazy: the verdict loads numpy and scipy

    v = write_verdict(sd, write=False)
    return {str(c["arm"]): {"verdict": c.get("verdict"), "pvalue": c.get("pvalue"),
                            "pvalue_adjusted": c.get("pvalue_adjusted"), "test": c.get("test"),
                            "n": min(int(c.get("n_treatment") or 0), int(c.get("n_control") or 0))}
            for c in v.get("comparisons") or []}


def extend(path: str, k: int, *, out: Callable[[str], None] = print) -> dict[str, Any] | None:
    """Record the extension of the ablation in ``path`` to ``k`` seeds per arm, then run the new seeds.

    Parameters
    ----------
    path : str
        The sweep dir.
    k : int
        Seeds per arm in all, stage 1 included.
    out : callable
        Where the verdict's path is printed.

    Returns
    -------
    dict or None
        The verdict (:func:`ablate.orchestrate.pipeline.execute`).

    Raises
    ------
    UserError
        See :func:`check_extension`; nothing is written then.
    """
    from ablate.orchestrate.pipeline import check_pins, execute  # noqa: PLC0415  # lazy: Hydra and OmegaConf off this module's import
    from ablate.stats.adaptive import METHOD, stage_weights  # noqa: PLC0415  # lazy: numpy off this module's import

    sd = open_extendable(path)
    with sd.locked():
        plan = sd.plan()
        state = check_extension(sd, plan, k)
        if state is None:
            try:
                check_pins(sd, plan)  # the code snapshot and the data, as a resume checks them
            except PinError as exc:  # nothing recorded yet: `ablate resume` would find nothing to run
                fix = (exc.fix or "").replace("`ablate resume` again", f"`ablate extend {sd.root} seeds={k}` again")
                raise PinError(exc.what, where=exc.where, fix=fix or None) from None
            seeds = [int(s) for s in plan["seeds"]]
            new = next_seeds(seeds, k)
            look = look_record(sd)
            record = {**plan, "seeds": seeds + new, EXTENSION_KEY: {
                "decided_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stage1_seeds": seeds, "stage2_seeds": new,
                "weights": list(stage_weights(len(seeds))), "method": METHOD, "look": look}}
            write_atomic(sd.plan_file, dump_yaml(record), durable=True)
            _log(f"ablate: extending {sd.root} from {len(seeds)} to {k} seeds per arm: seeds {new[0]}..{new[-1]} "
                 f"of {len(plan['arms'])} arms ({len(new) * len(plan['arms'])} trials); the verdict combines the two "
                 "stages (a two-stage inverse-normal test keeps α)")
        else:
            _log(f"ablate: finishing the extension of {sd.root} to {k} seeds per arm (recorded before; finished "
                 "trials are kept)")
    return execute(sd, out=out)
