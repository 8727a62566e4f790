"""Issue 42: each arm's config is resolved once per plan, and a Hydra context's config node is built once per process.

``ablation.yaml`` records every arm's resolved config. :func:`ablate.plan.arms.make_plan` resolves each arm to prove
the treatments, and the record took those again (in the same ``${hydra:...}`` context) instead of resolving each arm
a second time; :func:`ablate.plan.hydra_semantics.trial_hydra` copies one ``OmegaConf.structured(HydraConf)`` instead
of building it from the dataclass for every context. These tests hold the record equal to a fresh resolution and
count the work removed.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

import ablate.orchestrate.pipeline as pipeline
from ablate.orchestrate.pipeline import PLAN_RUN_DIR, plan_record, prepare
from ablate.plan import hydra_semantics
from ablate.plan.arms import Arm, Variable, make_plan, resolve
from ablate.plan.compose import compose
from ablate.plan.hydra_semantics import trial_hydra

CONF = Path(__file__).resolve().parents[2] / "conf"


def _prepared(tmp_path: Path) -> tuple[Any, Any]:
    """The README example's plan (`variable=lr`, a dry run: no warm parent), with a key that reads ``${hydra:}``
    and one that interpolates the variable, so that the plan context and derived keys both matter."""
    cfg = compose(["variable=lr", "seeds=3", "dry_run=true"], config_path=str(CONF)).cfg
    cfg = copy.deepcopy(cfg)
    cfg["task"]["ckpt"] = "${hydra:runtime.output_dir}/ckpt"
    cfg["task"]["lr_x10"] = "${mul10:${task.optim.lr}}"
    if not OmegaConf.has_resolver("mul10"):
        OmegaConf.register_new_resolver("mul10", lambda x: float(x) * 10)
    return prepare(cfg, variable_name="lr", cwd=str(tmp_path))


def _fresh(plan: Any) -> list[dict[str, Any]]:
    with trial_hydra(PLAN_RUN_DIR, plan.control.config.get("task")):
        return [resolve(a.config) for a in plan.arms]


def test_the_record_reuses_the_plans_resolution_and_equals_a_fresh_one(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    plan, opts = _prepared(tmp_path)
    want = _fresh(plan)
    assert [r["task"]["ckpt"] for r in want] == [f"{PLAN_RUN_DIR}/ckpt"] * 3
    assert [r["task"]["lr_x10"] for r in want] == [0.5, 0.05, 2.0]

    def refuse(cfg: Any) -> Any:  # the record must not resolve any arm again
        raise AssertionError("an arm was resolved a second time")

    monkeypatch.setattr(pipeline, "resolve", refuse)
    record = plan_record(plan, opts, {}, cwd=str(tmp_path))
    assert [a["resolved"] for a in record["arms"]] == want
    # copies: the record's resolved configs share no object with the plan's (YAML would write those as aliases)
    assert "&id" not in pipeline.dump_yaml([[a["resolved"] for a in record["arms"]], [a.resolved() for a in plan.arms]])


def test_an_arm_whose_config_was_replaced_is_resolved_again(tmp_path: Path) -> None:
    plan, opts = _prepared(tmp_path)
    node = {"suite": ["lr", "other"]}
    for arm in plan.arms:  # as a suite does once its variables are merged (ablate.orchestrate.suite)
        arm.config = {**arm.config, "variable": node}
    assert all(a.resolved() is None for a in plan.arms)
    record = plan_record(plan, opts, {}, cwd=str(tmp_path))
    assert [a["resolved"]["variable"] for a in record["arms"]] == [node] * 3
    assert [a["resolved"] for a in record["arms"]] == _fresh(plan)


def test_make_plan_resolves_each_arm_once_beside_the_stability_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import ablate.plan.arms as arms

    calls: list[int] = []
    real = arms.resolve_container

    def counted(cfg: Any) -> Any:
        calls.append(1)
        return real(cfg)

    monkeypatch.setattr(arms, "resolve_container", counted)
    control = {"task": {"lr": 0.1, "wd": "${task.lr}"}}
    plan = make_plan(control, Variable("lr", "task.lr", (0.2, 0.3)), [0, 1, 2])
    # control twice (the check that it resolves alike twice), each treatment once: was 2 + 2 x 1, then 3 more
    # for the record
    assert len(calls) == 4
    assert [a.resolved() for a in plan.arms] == [{"task": {"lr": v, "wd": v}} for v in (0.1, 0.2, 0.3)]


def test_a_group_treatments_resolution_is_kept_and_presence_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import ablate.plan.arms as arms

    calls: list[int] = []
    real = arms.resolve_container
    monkeypatch.setattr(arms, "resolve_container", lambda cfg: (calls.append(1), real(cfg))[1])
    control = {"task": {"opt": {"name": "sgd", "lr": 0.1}}}
    options = {"adam": {"task": {"opt": {"name": "adam", "lr": 0.1, "beta": 0.9}}}}
    plan = make_plan(control, Variable("opt", "task/opt", ("adam",), is_group=True), [0, 1, 2],
                     compose=lambda override: options[override.split("=")[1]], choices={"task/opt": "sgd"})
    assert len(calls) == 3  # control twice, the option once: `presence` resolved it a second time before
    treat = plan.treatments[0]
    assert treat.resolved() == options["adam"] and treat.resolved() is not treat.config
    assert treat.presence == {"task.opt.beta": "added"}


def test_resolved_answers_only_for_the_config_it_was_resolved_from() -> None:
    cfg = {"a": 1}
    arm = Arm(name="control", label="1", value=1, config=cfg, resolved_from=(cfg, {"a": 1}))
    assert arm.resolved() == {"a": 1}
    arm.config = {"a": 1}  # equal, but another object: not known to be unchanged
    assert arm.resolved() is None
    assert Arm(name="control", label="1", value=1, config={"a": 1}) == arm  # not part of an arm's equality


def test_trial_hydra_builds_hydras_node_once_and_every_context_is_as_a_fresh_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra.conf import HydraConf
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.setattr(hydra_semantics, "_HYDRA_CONF", None)
    built: list[int] = []
    real = OmegaConf.structured

    def counted(obj: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(OmegaConf, "structured", counted)
    seen = []
    for run, task in ((tmp_path / "a", {"app": "src/train.py"}), (tmp_path / "b", None), (tmp_path / "a", None)):
        with trial_hydra(run, task):
            seen.append(OmegaConf.to_container(HydraConfig.instance().cfg, resolve=False))
    assert len(built) == 1
    assert [(s["hydra"]["runtime"]["output_dir"], s["hydra"]["job"]["name"]) for s in seen] == [
        (str(tmp_path / "a"), "train"), (str(tmp_path / "b"), "ablate"), (str(tmp_path / "a"), "ablate")]
    # each context equals one built from the dataclass as before, and the kept node is left untouched
    monkeypatch.setattr(OmegaConf, "structured", real)
    node = OmegaConf.structured(HydraConf)
    node.runtime.output_dir, node.run.dir = str(tmp_path / "a"), str(tmp_path / "a")
    node.runtime.cwd, node.job.name, node.job.num = str(Path.cwd()), "ablate", 0
    assert seen[2] == OmegaConf.to_container(OmegaConf.create({"hydra": node}), resolve=False)
    assert OmegaConf.is_missing(hydra_semantics._HYDRA_CONF.job, "name")


#: In a fresh process: the warm parent's priming builds Hydra's node only for trials that open a Hydra context, and a
#: fork of it opens one without building it again. Prints one line per step.
PRIME = '''
import os, sys
from omegaconf import OmegaConf
from ablate.plan import hydra_semantics as hs
from ablate.trials.warm import parent
print(hs._HYDRA_CONF is None)
parent._prime_hydra_conf({"arms": [{"config": {"task": {"lr": 0.1}}}]})
print(hs._HYDRA_CONF is None)
parent._prime_hydra_conf({"arms": [{"config": {"task": {"lr": 0.1}}},
                                   {"config": {"task": {"out": "${hydra:runtime.output_dir}/ckpt"}}}]})
print(hs._HYDRA_CONF is None)
pid = os.fork()
if pid == 0:
    built = []
    real = OmegaConf.structured
    OmegaConf.structured = lambda *a, **k: (built.append(1), real(*a, **k))[1]
    with hs.trial_hydra("/tmp/trial/run"):
        from hydra.core.hydra_config import HydraConfig
        ok = HydraConfig.get().runtime.output_dir == "/tmp/trial/run"
    os._exit(10 * ok + len(built))
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
'''


def test_a_warm_parent_builds_hydras_node_before_forking_only_for_trials_that_use_it() -> None:
    out = subprocess.run([sys.executable, "-c", PRIME], capture_output=True, text=True, check=True).stdout.split("\n")
    # fresh: not built; an arm without ${hydra:} builds nothing; one with it builds the node; the fork's context
    # reads its own run dir (10) and builds no node (0)
    assert out[:4] == ["True", "True", "False", "10"]
