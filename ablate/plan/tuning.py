"""Tuning as planning: the ``tune:`` declaration, its settings, its seeds, and the arms it expands to (pure: no I/O).

A tuned ablation gives every arm, the control included, the same tuning budget: the same settings of the tuned
keys and the same tuning seeds (Melis et al. 2018; Lucic et al. 2018; Sivaprasad et al. 2020). Each arm's best
setting is then chosen on the tuning seeds and the arms are judged at their chosen settings on *other* seeds
(:mod:`ablate.judge.tuning`), so the selection's upward bias does not enter the test.

Every (arm, setting) pair is an ordinary arm of the plan (``ablation.yaml``), named ``<arm>+<key>=<value>``: its
trials are pinned, resumable and run by every launcher like any other. Its tuning trials run the tuning seeds; the
evaluation trials of an arm are its chosen setting's arm at the evaluation seeds (the ablation's ``seeds``), which
are disjoint from the tuning seeds and recorded in the plan before any trial runs.

The declaration (``tune`` in the composed config)::

    tune:
      key: task.optim.lr            # one key ...
      values: [0.01, 0.03, 0.1]     # ... a grid, or "log_uniform(0.001, 0.1)" with `budget`
      params: null                  # or several keys: {task.optim.lr: [...], task.optim.momentum: [...]}
      budget: null                  # settings drawn when a key is a distribution (a seeded random search)
      seeds: 2                      # tuning seeds per setting
      sampler_seed: 0               # seeds the random search's sampler
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ablate.errors import ConfigError
from ablate.plan.app_config import APP_NODE, app_params
from ablate.plan.arms import MAX_SEEDS, reserved_why
from ablate.record.names import format_value, safe_name

#: ``log_uniform(a, b)``: a distribution over (a, b), log-uniform (scipy.stats.loguniform).
_LOG_UNIFORM = re.compile(r"^\s*log_uniform\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*$")
#: The example every fix of the declaration shows.
EXAMPLE = "`tune.key=task.optim.lr tune.values=[0.01,0.03,0.1] tune.seeds=2`"
#: A tuned arm's name: the arm's, ``+``, then ``key=value`` per tuned key (``control+lr=0.01``).
SEP = "+"


@dataclass(frozen=True)
class Tune:
    """A validated ``tune:`` declaration.

    Attributes
    ----------
    keys : tuple of str
        The tuned config keys (dotted paths), in declared order.
    space : dict
        key -> ``{"grid": [values]}`` or ``{"log_uniform": [low, high]}``.
    settings : tuple of dict
        The settings every arm runs: key -> value, in order (a grid's product, or the seeded draws).
    seeds : list of int
        The tuning seeds (each setting of each arm runs every one); disjoint from the evaluation seeds.
    how : str
        How the settings were chosen, in words (the verdict and the dry run say it).
    """

    keys: tuple[str, ...]
    space: dict[str, dict[str, list[Any]]]
    settings: tuple[dict[str, Any], ...]
    seeds: list[int]
    how: str

    def record(self, eval_seeds: Sequence[int], arms: Sequence[str]) -> dict[str, Any]:
        """The plan's ``tuning`` record: everything the selection and the verdict need, written before any trial."""
        return {"keys": list(self.keys), "space": copy.deepcopy(self.space),
                "settings": [dict(s) for s in self.settings], "seeds": list(self.seeds),
                "eval_seeds": [int(s) for s in eval_seeds], "how": self.how, "base_arms": list(arms)}


def _space(values: Any, where: str) -> dict[str, list[Any]]:
    """One key's search space: a non-empty list of distinct values, or ``log_uniform(a, b)`` with 0 < a < b."""
    if isinstance(values, str):
        m = _LOG_UNIFORM.match(values)
        if not m:
            raise ConfigError(f"must be a list of values or log_uniform(a, b), got {values!r}", where=where,
                              fix=f"e.g. {EXAMPLE}, or `tune.values='log_uniform(0.001,0.1)' tune.budget=8`")
        try:
            lo, hi = float(m.group(1)), float(m.group(2))
        except ValueError:
            raise ConfigError(f"log_uniform takes two numbers, got {values!r}", where=where,
                              fix="e.g. `log_uniform(0.001, 0.1)`") from None
        if not (0 < lo < hi) or not math.isfinite(hi):
            raise ConfigError(f"log_uniform(a, b) needs 0 < a < b, got a={lo!r}, b={hi!r}", where=where,
                              fix="e.g. `log_uniform(0.001, 0.1)`")
        return {"log_uniform": [lo, hi]}
    if not isinstance(values, list | tuple) or not values:
        raise ConfigError(f"must be a non-empty list of values or log_uniform(a, b), got {values!r}", where=where,
                          fix=f"e.g. {EXAMPLE}")
    seen: list[Any] = []
    for v in values:
        if isinstance(v, Mapping) or any(type(v) is type(s) and v == s for s in seen):
            raise ConfigError(f"lists {v!r} {'as a mapping' if isinstance(v, Mapping) else 'twice'}", where=where,
                              fix="list each setting once, as a plain value")
        seen.append(v)
    return {"grid": list(values)}


def parse_tune(tune_cfg: Any, eval_seeds: Sequence[int], control: Mapping[str, Any],
               variable_keys: Sequence[str]) -> Tune | None:
    """Validate the ``tune:`` declaration against the control config; None when nothing is tuned.

    Parameters
    ----------
    tune_cfg : mapping or None
        The composed ``tune`` node.
    eval_seeds : sequence of int
        The ablation's seeds, which become the evaluation seeds; the tuning seeds follow them (``max + 1`` on).
    control : mapping
        The control arm's config (a plain container): every tuned key must be one of its keys (an ``app`` task's
        own keys are named as its variable's are, ``model.lr`` for ``task.params.model.lr``).
    variable_keys : sequence of str
        The keys the arms change (a tuned key may not be one: it would be tuned away).

    Raises
    ------
    ConfigError
        Naming the setting that is wrong and how to write it.
    """
    if tune_cfg is None:
        return None
    if not isinstance(tune_cfg, Mapping):
        raise ConfigError(f"must be a mapping, got {tune_cfg!r}", where="tune", fix=f"e.g. {EXAMPLE}")
    unknown = sorted(set(tune_cfg) - {"key", "values", "params", "budget", "seeds", "sampler_seed"})
    if unknown:
        raise ConfigError(f"has no setting {', '.join(map(repr, unknown))}", where="tune",
                          fix="use key + values (one key) or params (several), budget, seeds, sampler_seed")
    key, values, params = tune_cfg.get("key"), tune_cfg.get("values"), tune_cfg.get("params")
    if key is None and values is None and params is None:
        return None
    if params is not None and (key is not None or values is not None):
        raise ConfigError("gives both `key`/`values` and `params`", where="tune",
                          fix="one key: `tune.key` and `tune.values`; several: `tune.params` only")
    if params is None:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"must name a config key, got {key!r}", where="tune.key", fix=f"e.g. {EXAMPLE}")
        if values is None:
            raise ConfigError("is missing", where="tune.values", fix=f"e.g. {EXAMPLE}")
        params = {key: values}
    if not isinstance(params, Mapping) or not params:
        raise ConfigError(f"must map config keys to their values, got {params!r}", where="tune.params",
                          fix="e.g. `tune: {params: {task.optim.lr: [0.01, 0.1], task.optim.momentum: [0.5, 0.9]}}`")
    space: dict[str, dict[str, list[Any]]] = {}
    flat = _flat_keys(control)
    app = app_params(control) is not None
    for k, v in params.items():
        k = str(k)
        if app and k not in flat and f"{APP_NODE}.{k}" in flat:  # an app's own key (`model.lr`), as a variable's
            k = f"{APP_NODE}.{k}"
        if (why := reserved_why(k)) is not None:  # `tune.key=seed` set every tuning trial's seed
            raise ConfigError(f"{k!r} cannot be tuned: {why}", where="tune",
                              fix="tune a key of the task, e.g. `tune.key=task.optim.momentum`")
        if k not in flat:
            near = [f for f in flat if f.rsplit(".", 1)[-1] == k.rsplit(".", 1)[-1]]
            raise ConfigError(f"{k!r} is not a key of the control config, so no trial could set it", where="tune",
                              fix=f"name the full dotted key{', e.g. ' + near[0] if near else ''}")
        if any(k == vk or k.startswith(vk + ".") or vk.startswith(k + ".") for vk in variable_keys):
            raise ConfigError(f"{k!r} is the variable under test (or holds it), so tuning it would erase the "
                              "difference the ablation measures", where="tune",
                              fix="tune another key (e.g. the learning rate while the variable is the width)")
        space[k] = _space(v, "tune.values" if tune_cfg.get("params") is None else f"tune.params.{k}")
    seeds_n = tune_cfg.get("seeds", 2)
    if not isinstance(seeds_n, int) or isinstance(seeds_n, bool) or seeds_n < 1:
        raise ConfigError(f"must be a whole number of tuning seeds per setting (at least 1), got {seeds_n!r}",
                          where="tune.seeds", fix="e.g. `tune.seeds=2`")
    if seeds_n > MAX_SEEDS:  # `tune.seeds=200000000` built its list until a MemoryError
        raise ConfigError(f"{seeds_n} tuning seeds per setting is more than {MAX_SEEDS}, the most a sweep dir holds "
                          "(one dir per trial): taken for a typo", where="tune.seeds", fix="e.g. `tune.seeds=2`")
    sampler_seed = tune_cfg.get("sampler_seed", 0)
    if not isinstance(sampler_seed, int) or isinstance(sampler_seed, bool) or sampler_seed < 0:
        raise ConfigError(f"must be a non-negative integer, got {sampler_seed!r}", where="tune.sampler_seed",
                          fix="e.g. `tune.sampler_seed=0`")
    budget = tune_cfg.get("budget")
    drawn = any("log_uniform" in s for s in space.values())
    if drawn:
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 2:
            raise ConfigError(f"must be the number of settings to draw (at least 2) when a key is a distribution, "
                              f"got {budget!r}", where="tune.budget", fix="e.g. `tune.budget=8`")
        if budget > MAX_SEEDS:  # `tune.budget=1000000000` drew settings without end
            raise ConfigError(f"{budget} settings is more than {MAX_SEEDS}, the most a sweep dir holds (one dir per "
                              "trial): taken for a typo", where="tune.budget", fix="e.g. `tune.budget=8`")
        settings = draw_settings(space, budget, sampler_seed)
        how = (f"random search: {budget} settings drawn by a sampler seeded with {sampler_seed} "
               "(scipy.stats.loguniform for log_uniform keys, a uniform choice for listed ones)")
    else:
        if budget is not None:
            raise ConfigError(f"applies to a distribution (log_uniform), but every key lists its values: the grid "
                              f"has {math.prod(len(s['grid']) for s in space.values())} settings", where="tune.budget",
                              fix="drop `tune.budget`, or give a key `log_uniform(a, b)`")
        settings = tuple(dict(zip(space, combo, strict=True))
                         for combo in itertools.product(*(s["grid"] for s in space.values())))
        how = f"grid: every combination of the listed values ({len(settings)} settings)"
    start = max(eval_seeds) + 1 if eval_seeds else 0
    return Tune(keys=tuple(space), space=space, settings=settings,
                seeds=list(range(start, start + seeds_n)), how=how)


def draw_settings(space: Mapping[str, Mapping[str, list[Any]]], budget: int, sampler_seed: int
                  ) -> tuple[dict[str, Any], ...]:
    """``budget`` settings drawn from ``space`` by a sampler seeded with ``sampler_seed`` (the same every run).

    A ``log_uniform`` key is drawn from :data:`scipy.stats.loguniform` (rounded to 6 significant digits, so
    the value is written and read back exactly); a listed key by a uniform choice of its values.
    """
    import numpy as np  # noqa: PLC0415  # lazy: numpy off this module's import
    from scipy import stats  # noqa: PLC0415  # lazy: numpy and scipy off this module's import

    rng = np.random.default_rng(sampler_seed)
    out = []
    for _ in range(budget):
        setting: dict[str, Any] = {}
        for key, s in space.items():
            if "log_uniform" in s:
                lo, hi = s["log_uniform"]
                setting[key] = float(f"{float(stats.loguniform(lo, hi).rvs(random_state=rng)):.6g}")
            else:
                setting[key] = s["grid"][int(rng.integers(len(s["grid"])))]
        out.append(setting)
    return tuple(out)


def _flat_keys(control: Mapping[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in control.items():
        p = f"{prefix}.{k}" if prefix else str(k)
        out.add(p)
        if isinstance(v, Mapping):
            out |= _flat_keys(v, p)
    return out


def get_key(config: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` of a plain config."""
    node: Any = config
    for part in key.split("."):
        node = node[part]
    return node


def set_key(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``config`` with the dotted ``key`` set to ``value``."""
    out = copy.deepcopy(config)
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)
    return out


def setting_label(setting: Mapping[str, Any]) -> str:
    """``lr=0.01`` (``lr=0.01, momentum=0.9``): a setting in tables, by each key's last part."""
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={format_value(v)}" for k, v in setting.items())


def tuned_arm_name(arm: str, setting: Mapping[str, Any], taken: set[str]) -> str:
    """The file-name-safe, unique name of ``arm`` at ``setting`` (``control+lr=0.01``); adds it to ``taken``."""
    text = SEP.join([arm, *(f"{k.rsplit('.', 1)[-1]}={format_value(v)}" for k, v in setting.items())])
    name = safe_name(text)
    i = 2
    while name.casefold() in {t.casefold() for t in taken}:
        name = f"{safe_name(text, 76)}-{i}"
        i += 1
    taken.add(name)
    return name


def expand(arms: Sequence[Mapping[str, Any]], tune: Tune) -> list[dict[str, Any]]:
    """The plan's arm records for a tuned ablation: every arm at every setting, the control's settings first.

    Parameters
    ----------
    arms : sequence of mapping
        The plan's arm records (control first), each with ``name``, ``label``, ``config``, ``changes``.
    tune : Tune

    Returns
    -------
    list of dict
        One record per (arm, setting): the arm's record with the setting applied to its config, the tuned keys'
        change from the control's composed value added to ``changes`` (so the confound check allows them),
        ``base`` (the arm's name), ``base_label``, ``setting`` and ``setting_index``.
    """
    control = arms[0]["config"]
    taken: set[str] = set()
    out = []
    for arm in arms:
        for i, setting in enumerate(tune.settings):
            config = dict(arm["config"])
            changes = {k: list(v) for k, v in (arm.get("changes") or {}).items()}
            for k, v in setting.items():
                config = set_key(config, k, v)
                changes[k] = [get_key(control, k), v]
            out.append({**arm, "name": tuned_arm_name(arm["name"], setting, taken),
                        "label": f"{arm.get('label', arm['name'])} @ {setting_label(setting)}",
                        "config": config, "changes": changes, "base": arm["name"],
                        "base_label": str(arm.get("label", arm["name"])), "setting": dict(setting),
                        "setting_index": i})
    return out


def trial_count(tuning: Mapping[str, Any], n_arms: int) -> tuple[int, int]:
    """(tuning trials, evaluation trials) of a tuned ablation with ``n_arms`` arms (the control included)."""
    return (n_arms * len(tuning["settings"]) * len(tuning["seeds"]), n_arms * len(tuning["eval_seeds"]))


def describe(tuning: Mapping[str, Any], n_arms: int) -> list[str]:
    """The dry run's lines for a tuned ablation: what is tuned, how, and the trial count (tuning + evaluation)."""
    n_tune, n_eval = trial_count(tuning, n_arms)
    keys = ", ".join(tuning["keys"])
    k, s = len(tuning["settings"]), len(tuning["seeds"])
    lines = [f"  tune: {keys}; {tuning['how']}",
             "    settings: " + "; ".join(setting_label(x) for x in tuning["settings"]),
             f"    tuning seeds {_seeds(tuning['seeds'])}; evaluation seeds {_seeds(tuning['eval_seeds'])} (disjoint)",
             f"  trials: {n_tune + n_eval} = {n_tune} tuning ({n_arms} arms x {k} settings x {s} seeds) + {n_eval} "
             f"evaluation ({n_arms} arms x {len(tuning['eval_seeds'])} seeds, each arm at its best setting)"]
    return lines


def _seeds(seeds: Sequence[int]) -> str:
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}"
    return ", ".join(map(str, seeds))
