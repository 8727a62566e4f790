"""The bottom line: per treatment one sentence a reader acts on, then one "Next:" step, as small data objects.

:func:`bottom_line` reads a verdict (the content of verdict.json) and returns a :class:`BottomLine`: one
:class:`TreatmentLine` per treatment (what changed, Δ with its CI in the metric's own units and sign, the verdict word,
firm or not) and a :class:`NextStep` (the one command to run, from the plan's recorded command line,
:mod:`ablate.judge.rerun`). verdict.md, the API's ``Verdict`` repr, the trackers (through verdict.json's
``bottom_line``), the transfer report and ``ablate audit`` word a verdict from these objects, so the words are the same
everywhere.

One sign convention: Δ = treatment − control in the metric's own units and sign, everywhere; the heading says once
whether higher or lower is better (:data:`DIRECTION`). Pure: no I/O.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ablate.judge.rerun import recorded, rerun_command
from ablate.judge.unchanged import short as unchanged_short
from ablate.record.names import value_label
from ablate.stats.compare import ci_name
from ablate.stats.core import FIRM_MIN_CONTINUOUS, verdict_label

#: The metric's direction, as the heading of every report says it once.
DIRECTION = {"maximize": "higher is better", "minimize": "lower is better"}
#: The seed advice's cap (seeds per arm), when a verdict does not record it.
DEFAULT_CAP = 50


def direction(goal: str | None) -> str:
    """``higher is better`` for a metric to maximize, ``lower is better`` for one to minimize."""
    return DIRECTION.get(str(goal or "maximize"), DIRECTION["maximize"])


def raw_sign(goal: str | None) -> float:
    """+1 or −1: turns verdict.json's sign-normalised numbers (positive = better) into the metric's own sign."""
    return -1.0 if goal == "minimize" else 1.0


def signed(x: float | None, dec: int) -> str:
    """``+0.019`` / ``-0.041``: a difference always with its sign (``–`` when missing)."""
    if x is None or not math.isfinite(x):
        return "–"
    s = f"{x:+.{dec}f}"
    return "+" + s[1:] if float(s) == 0 else s  # no "-0.000"


def raw_interval(ci: Sequence[float | None] | None, goal: str | None) -> tuple[float, float] | None:
    """A sign-normalised interval of verdict.json in the metric's own sign (treatment − control), ordered."""
    if not ci or ci[0] is None or ci[1] is None:
        return None
    s = raw_sign(goal)
    lo, hi = sorted((s * float(ci[0]), s * float(ci[1])))
    return lo, hi


def decimals(values: Sequence[Any]) -> int:
    """Decimals that show the arms' spread: 2 significant digits of the smallest positive SD-like scale."""
    scales = [abs(v) for v in values if isinstance(v, int | float) and v and math.isfinite(v)]
    if not scales:
        return 4
    return int(min(8, max(0, -math.floor(math.log10(min(scales))) + 1)))


def verdict_decimals(v: Mapping[str, Any]) -> int:
    """The decimals of a verdict's differences: from its arms' SDs and SEMs (verdict.md's choice)."""
    return decimals([a.get("sd") for a in v["arms"]] + [a.get("sem") for a in v["arms"]])


def suite_variables(v: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A suite's variables (``name``, ``key``, ``values``, ``arms``); empty for a one-variable ablation."""
    return list((v.get("suite") or {}).get("variables") or [])


def key_of(v: Mapping[str, Any], c: Mapping[str, Any]) -> str:
    """The key a comparison varies (in a suite, its own variable's)."""
    keys = {sv["name"]: sv["key"] for sv in suite_variables(v)}
    return str(keys.get(c.get("variable"), (v.get("variable") or {}).get("key", "?")))


def control_value(v: Mapping[str, Any], c: Mapping[str, Any] | None = None) -> str:
    """The control's value of the key a comparison varies (a suite's control has one value per key)."""
    arms = v["arms"]
    value = arms[0].get("value") if arms else "?"
    if isinstance(value, Mapping):
        keys = {sv["name"]: sv["key"] for sv in suite_variables(v)}
        key = keys.get(c.get("variable")) if c else None
        for k in (key, key.replace("/", ".")) if key is not None else ():  # a group's key: `task/params/callbacks`
            if k in value:
                return value_label(value[k])
        return "; ".join(f"{k} {value_label(x)}" for k, x in value.items())
    return value_label(value)


@dataclass(frozen=True)
class TreatmentLine:
    """One treatment's bottom line: the facts, worded by :meth:`sentence` (at most about 30 words).

    Attributes
    ----------
    arm, key, control, value : str
        The arm's name, the key it changes, the control's value and its own.
    metric : str
    verdict : str
        The plain verdict word (verdict.json's ``verdict``).
    firm : bool or None
        verdict.json's ``firm``: False for an indicative better/worse.
    delta : float or None
        Δ = treatment − control, metric units, the metric's own sign.
    ci : (float, float) or None
        Its CI (for ``equivalent``: the TOST interval), the metric's own sign.
    ci_level : float or None
    margin : float or None
        δ, for an ``equivalent`` verdict.
    dec : int
        Decimals of Δ and its CI.
    why : str
        For ``insufficient data``: the reason in a few words.
    size : str or None
        With a margin, a better/worse's size against δ: ``≥ δ``, ``< δ`` or ``size uncertain``.
    seeds_next : int or None
        Seeds per arm a next run needs for this treatment (None: nothing to run for it).
    unchanged : str
        For a treatment whose every seed equals the control's: what was seen and the likeliest cause
        (:func:`ablate.judge.unchanged.short`); the sentence says it instead of a Δ.
    invalid, confounded : bool
        The ablation is invalid (said once, above); the comparison is confounded (``ablate audit``).
    change : str or None
        What changed, when the caller words it (``ablate audit``: ``epochs 4 → 5``); default: ``key control →
        value``.
    widened : bool
        The CI is wider than the family's level because the skew guard fired (its level divided by the guard's
        factor): the sentence says so beside the level, so a 99.5% CI is not read as a typo.
    """

    arm: str
    key: str
    control: str
    value: str
    metric: str
    verdict: str
    firm: bool | None
    delta: float | None
    ci: tuple[float, float] | None
    ci_level: float | None
    margin: float | None
    dec: int
    why: str = ""
    size: str | None = None
    seeds_next: int | None = None
    invalid: bool = False
    confounded: bool = False
    change: str | None = None
    unchanged: str = ""
    widened: bool = False

    @property
    def word(self) -> str:
        """The verdict word as people read it: ``better (indicative)`` for an indicative better; with a margin, its
        size against δ (``better (≥ δ)``)."""
        return verdict_label(self.verdict, self.firm) + (f" ({self.size})" if self.size else "")

    def status(self) -> str:
        """What the word leaves open: firm or not, or why there is no decision."""
        if self.verdict == "insufficient data":
            return self.why or "nothing to test"
        if self.confounded:
            return "but the runs differ in more than the variable, so it cannot be credited to it"
        if self.invalid:
            return "but the ablation is invalid: do not act on it"
        if self.verdict in ("better", "worse"):
            return "firm" if self.firm is not False else "not yet firm (a lead to confirm)"
        if self.verdict == "equivalent":
            return "no difference that matters" + (f" (margin ±{self.margin:g})" if self.margin is not None else "")
        return self.why or "the data cannot tell yet"  # inconclusive (``why``: a sequential arm stopped for futility)

    def sentence(self, *, markdown: bool = True) -> str:
        """``lr=0.2 (task.optim.lr 0.05 → 0.2) changed val_acc by +0.019 (97.5% CI +0.004 to +0.034): better,
        firm.`` (bold arm and word in markdown)."""
        b = "**" if markdown else ""
        what = self.change or (f"{self.key} {self.control} → {self.value}" if self.control != self.value else "")
        change = f" ({what})" if what else ""  # "x → x" says nothing: left out (runs whose values were not recorded)
        head = f"{b}{self.arm}{b}{change}"
        word = f"{b}{self.word}{b}"
        if self.unchanged:
            return f"{head}: {word}: {self.unchanged}."
        if self.delta is None:
            return f"{head}: {word}: {self.status()}."
        ci = ""
        if self.ci is not None:
            # beside an indicative verdict its CI is indicative too (coverage not assured there, docs/verdict.md)
            name = ci_name(self.ci_level, self.firm is False)
            wide = ", widened: skewed values, see Flags" if self.widened else ""
            ci = f" ({name} {signed(self.ci[0], self.dec)} to {signed(self.ci[1], self.dec)}{wide})"
        return f"{head} changed {self.metric} by {signed(self.delta, self.dec)}{ci}: {word}, {self.status()}."


@dataclass(frozen=True)
class NextStep:
    """What to run next: one command (runnable as printed) and why, or only the why when nothing is to run.

    Attributes
    ----------
    command : str or None
    why : str
    seeds : int or None
        Seeds per arm the command runs.
    before : str
        What to do before running it (fix the cause of an invalid ablation).
    """

    command: str | None
    why: str
    seeds: int | None = None
    before: str = ""

    def line(self, *, markdown: bool = True) -> str:
        """``Next: `ablate -m ...` (why).``, ``Next: <before>, then `ablate -m ...` (why).`` or ``Next: why.``"""
        why = self.why if markdown else self.why.replace("`", "")  # plain text: no code marks
        if self.command is None:
            return f"Next: {why}."
        cmd = f"`{self.command}`" if markdown else self.command
        return f"Next: {self.before + ', then ' if self.before else ''}{cmd} ({why})."


@dataclass(frozen=True)
class BottomLine:
    """The bottom line of a verdict: the metric's direction, one :class:`TreatmentLine` per treatment, one
    :class:`NextStep`."""

    metric: str
    direction: str
    treatments: tuple[TreatmentLine, ...]
    next: NextStep

    def lines(self, *, markdown: bool = True) -> list[str]:
        """One line per treatment (a markdown list item in markdown), then the Next line."""
        dash = "- " if markdown else ""
        return [*(dash + t.sentence(markdown=markdown) for t in self.treatments), "", self.next.line(markdown=markdown)]

    def to_json(self) -> dict[str, Any]:
        """verdict.json's ``bottom_line``: the sentences as the report prints them (plain text) and the facts."""
        return {"direction": self.direction,
                "treatments": [{**asdict(t), "word": t.word, "sentence": t.sentence(markdown=False)}
                               for t in self.treatments],
                "next": {**asdict(self.next), "line": self.next.line(markdown=False)}}


def firm_seeds(c: Mapping[str, Any]) -> int:
    """Seeds per arm from which an indicative better/worse would be firm: verdict.json's ``firm_from`` (20 for a
    continuous metric; for a 0/1 metric, where Fisher's exact test rejects at the same success rates), or, for a 0/1
    metric whose rates would not be firm within the seed cap, the cap (the most the advice plans for); on evidently
    skewed values (``skew_evident``), which no number of seeds makes firm, 20, the floor of a run ablate advises."""
    if c.get("skew_evident"):
        return 20
    if c.get("binary") and not c.get("firm_from"):
        return int((c.get("seed_advice") or {}).get("cap") or DEFAULT_CAP)
    return int(c.get("firm_from") or 20)


def skew_stopped(c: Mapping[str, Any]) -> bool:
    """A sequential treatment stopped at a crossing that only evident skew keeps indicative (verdict.json's
    ``sequential.skewed_stop``, issue 39): like a futility stop it asks for no more seeds, since none would make it
    firm."""
    return bool((c.get("sequential") or {}).get("skewed_stop"))


def futility_words(c: Mapping[str, Any]) -> str:
    """``stopped for futility at look 1 (N = 5): conditional power 0.031 under the planned 0.5 SD, below 0.1`` for a
    sequential treatment stopped for futility (verdict.json's ``sequential``); empty otherwise. Such an arm asks for no
    more seeds: the plan judged them not worth it."""
    s = c.get("sequential") or {}
    if s.get("stop_reason") != "futility":
        return ""
    cp = s.get("conditional_power")
    return (f"stopped for futility at look {s.get('look')} (N = {s.get('n')}): conditional power "
            + (f"{cp:.3f}" if isinstance(cp, int | float) else "?")
            + f" under the planned {s.get('effect')} SD, below {s.get('futility_threshold')}")


def seeds_next(c: Mapping[str, Any]) -> int | None:
    """Seeds per arm the next run needs for one treatment: the larger of the seeds that make an indicative verdict
    firm and those that give 80% power for its effect; the advised seeds of an inconclusive one (at most the
    advice's cap, which a range answer's advised N exceeds; on a continuous metric at least
    :data:`ablate.stats.core.FIRM_MIN_CONTINUOUS`, below which no verdict is firm); None when nothing is to run (a
    firm or equivalent verdict, or "> cap" advice)."""
    if c.get("unchanged"):  # no number of seeds tells apart two arms that ran the same thing
        return None
    adv = c.get("seed_advice") or {}
    need = adv.get("n_needed")
    if need is not None and adv.get("cap"):  # a range answer advises more than the cap: the next run stops at the cap
        need = min(int(need), int(adv["cap"]))
    n = adv.get("n") or min(c.get("n_treatment") or 0, c.get("n_control") or 0)
    if c.get("verdict") in ("better", "worse") and c.get("firm") is False:
        return max(firm_seeds(c), int(need or 0))
    if c.get("verdict") == "inconclusive" and need is not None and need > n:
        # a continuous metric is never firm below FIRM_MIN_CONTINUOUS seeds: a run advised for power runs at least
        # that many (a 0/1 metric's exact tests have no such floor)
        return int(need) if c.get("binary") else max(int(need), FIRM_MIN_CONTINUOUS)
    return None


def treatment_line(c: Mapping[str, Any], v: Mapping[str, Any], dec: int | None = None, *,
                   confounded: bool = False, change: str | None = None) -> TreatmentLine:
    """One comparison of verdict.json as a :class:`TreatmentLine`.

    Parameters
    ----------
    c : mapping
        A comparison of verdict.json.
    v : mapping
        The verdict (``metric``, ``goal``, ``arms``, ``variable``, ``suite``, ``invalid``).
    dec : int, optional
        Decimals; default: :func:`verdict_decimals`.
    confounded : bool
        The compared runs differ in more than the variable (``ablate audit``): the sentence says it cannot be
        credited to the variable, whatever the word.
    change : str, optional
        What changed, in the caller's words (``ablate audit``: ``epochs 4 → 5``); default: from the verdict's
        variable and arms.

    Returns
    -------
    TreatmentLine
        Its :meth:`TreatmentLine.sentence` is the bottom line's sentence for this treatment.
    """
    goal = v.get("goal")
    verdict = str(c.get("verdict"))
    diff = c.get("diff")
    ci, level = raw_interval(c.get("ci"), goal), c.get("ci_level")
    if verdict == "equivalent" and c.get("tost_ci"):
        ci, level = raw_interval(c.get("tost_ci"), goal), c.get("tost_level")
    why = ""
    if verdict == "insufficient data":
        why = (str(c.get("seed_ignored_why") or "every seed gave the same result, as the warning above says")
               if c.get("seed_ignored")
               else str(c.get("insufficient_reason") or "nothing to test"))
    fut = futility_words(c)
    if fut and verdict == "inconclusive":
        why = fut
    return TreatmentLine(
        arm=str(c["arm"]), key=key_of(v, c), control=control_value(v, c), value=value_label(c.get("value")),
        metric=str(v["metric"]), verdict=verdict, firm=c.get("firm"),
        delta=None if diff is None or verdict == "insufficient data" else raw_sign(goal) * float(diff),
        ci=ci, ci_level=level, margin=c.get("margin"), dec=verdict_decimals(v) if dec is None else dec, why=why,
        size=c.get("size") if verdict in ("better", "worse") else None,
        seeds_next=None if fut or skew_stopped(c) else seeds_next(c),
        invalid=bool(v.get("invalid")), confounded=confounded, change=change,
        unchanged=unchanged_short(c) if c.get("unchanged") else "",
        widened=float(c.get("guard_factor") or 1) > 1 and verdict != "equivalent")


def tuned_cost(tuning: Mapping[str, Any], n: int) -> str:
    """The trials a tuned ablation with ``n`` evaluation seeds per arm costs, its tuning included, in words:
    ``10 evaluation seeds per arm = 10 x 2 arms + 16 tuning trials = 36 trials``.

    Parameters
    ----------
    tuning : mapping
        verdict.json's ``tuning`` (:func:`ablate.judge.tuning.section`): its arms, settings and tuning seeds.
    n : int
        Evaluation seeds per arm.
    """
    arms = len(tuning["arms"])
    t = arms * len(tuning["settings"]) * len(tuning["seeds"])
    return f"{n} evaluation seeds per arm = {n} x {arms} arms + {t} tuning trials = {n * arms + t} trials"


def next_step(v: Mapping[str, Any], lines: Sequence[TreatmentLine]) -> NextStep:
    """The one thing to run next for the whole ablation (every arm runs again: one command)."""
    opts = v.get("options") or {}
    sequential = opts.get("sequential") == "group"
    looks = list(opts.get("looks") or []) if sequential else None
    names = [str(sv["name"]) for sv in suite_variables(v)] or [str((v.get("variable") or {}).get("name", "?"))]
    n_now = len(v.get("seeds") or [])
    command = v.get("command")

    def rerun(seeds: int) -> str:
        return rerun_command(command, seeds, variables=names, looks=looks)

    if v.get("invalid"):
        return NextStep(rerun(n_now), f"the same {n_now} seeds per arm, a new sweep dir", n_now,
                        before="fix the cause named at the top (the ablation is invalid)")
    unfinished = sum(int(a.get("pending") or 0) for a in v["arms"])
    waiting = [c for c in v["comparisons"] if str(c.get("seed_advice_sequential") or "").startswith(
        ("continue to look", "no look complete"))]
    if (unfinished and not sequential) or waiting:
        where = shlex.quote(str(v.get("resume_dir") or v.get("sweep_dir") or "DIR"))
        return NextStep(f"ablate resume {where}", f"{unfinished} planned trial(s) have not finished")
    need = [t for t in lines if t.seeds_next is not None]
    if need:
        n = max(t.seeds_next for t in need if t.seeds_next is not None)
        unknown = "" if recorded(command) else "; this plan did not record its command line: add the run's other " \
                                                "overrides"
        if v.get("extend_dir") and not v.get("tuning") and n > n_now + 1:  # `ablate extend`: only the new seeds
            where = shlex.quote(str(v["extend_dir"]))
            return NextStep(f"ablate extend {where} seeds={n}", f"{n} seeds per arm: runs only the {n - n_now} new "
                            "ones, in this sweep dir, and a two-stage combination test keeps α; Seed recommendation "
                            "says why", n)
        if v.get("tuning"):  # a new run tunes every arm again: its tuning trials are part of the cost
            return NextStep(rerun(n), f"{tuned_cost(v['tuning'], n)}, a new sweep dir that tunes again; Seed "
                            f"recommendation says why{unknown}", n)
        return NextStep(rerun(n), f"{n} seeds per arm, a new sweep dir; Seed recommendation says why{unknown}", n)
    stuck = [t.arm for t in lines if t.verdict == "inconclusive" and not t.unchanged]
    same = [t.arm for t in lines if t.unchanged]
    if same and not stuck:
        return NextStep(None, f"check that the change of {', '.join(same)} reaches the task (the trial's config.yaml, "
                              "and command.json for a script): no number of seeds tells identical arms apart")
    if stuck:
        cap = next((int((c.get("seed_advice") or {}).get("cap") or DEFAULT_CAP) for c in v["comparisons"]),
                   DEFAULT_CAP)
        return NextStep(None, f"no run of up to {cap} seeds per arm is likely to decide {', '.join(stuck)} (Seed "
                              "recommendation); only a margin (`margin=δ`) could show that no difference matters")
    if any(t.verdict == "insufficient data" for t in lines):
        return NextStep(None, "nothing ablate can run will decide it as it stands: see the reason above")
    return NextStep(None, "nothing to run: every verdict is firm" if all(
        t.firm is not False for t in lines) else "nothing to run")


def bottom_line(v: Mapping[str, Any], dec: int | None = None) -> BottomLine:
    """The bottom line of a verdict (verdict.json's content).

    Parameters
    ----------
    v : mapping
        The verdict; ``command`` (the plan's recorded command line) and, with unfinished trials, ``resume_dir``
        (the sweep dir as named from the project's root) make the Next step a runnable command.
    dec : int, optional
        Decimals of the differences; default: :func:`verdict_decimals`.

    Returns
    -------
    BottomLine
    """
    lines = tuple(treatment_line(c, v, dec) for c in v["comparisons"])
    return BottomLine(metric=str(v["metric"]), direction=direction(v.get("goal")), treatments=lines,
                      next=next_step(v, lines))
