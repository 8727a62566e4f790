"""An ``fn`` task's config node: built once per arm in a process running several of its trials (inline),
copied per seed, so a task that changes its config never changes the next trial's."""

from __future__ import annotations

from ablate.trials.tasks.fn import _node


def test_each_trial_gets_its_own_copy_with_its_own_seed() -> None:
    arm = {"name": "control"}
    base = {"task": {"lr": 0.1, "layers": [64, 64]}, "variable": {"key": "task.lr"}}
    nodes = []
    for seed in (0, 1, 2, 3):
        node = _node({**base, "seed": seed}, arm)
        assert node.seed == seed and node.task.lr == 0.1 and list(node.task.layers) == [64, 64]
        node.task.lr = 99.0  # what a task may do to its own config
        node.task.layers.append(1)
        nodes.append(node)
    assert [n.seed for n in nodes] == [0, 1, 2, 3]
    other = _node({**base, "task": {"lr": 0.2, "layers": [64, 64]}, "seed": 4}, arm)  # a changed config is rebuilt
    assert other.task.lr == 0.2 and other.seed == 4


def test_a_config_without_interpolations_resolves_to_what_omegaconf_gives() -> None:
    from omegaconf import OmegaConf

    from ablate.trials.config import resolve_config

    arm = {"task": {"lr": 0.1, "layers": [64, {"a": None}], "inf": float("inf"), "flag": True, "name": "x"},
           "launcher": {"name": "local", "max_parallel": None}, "seeds": [0, 1, 2]}
    for seed in (0, 1):
        got = resolve_config(arm, seed)
        assert got == OmegaConf.to_container(OmegaConf.create({**arm, "seed": seed}), resolve=True)
        assert got["seed"] == seed
    assert resolve_config({"a": "${b}", "b": 2}, 0)["a"] == 2  # interpolated: resolved by OmegaConf
    assert resolve_config({"a": "\\${b}", "b": 2}, 0)["a"] == "${b}"  # escaped: OmegaConf unescapes it


def test_a_template_made_before_the_fork_is_what_each_trial_copies() -> None:
    from omegaconf import OmegaConf

    from ablate.trials.tasks.fn import prepare_node

    arm = {"name": "lr=0.2"}
    cfg = {"task": {"lr": 0.2, "layers": [8]}, "seed": 0}
    prepare_node(cfg, arm)  # the warm parent, from the plan's first seed
    node = _node({**cfg, "seed": 7}, arm)
    assert node == OmegaConf.create({**cfg, "seed": 7}) and node.seed == 7
    node.task.layers.append(9)  # the task's own copy
    assert list(_node({**cfg, "seed": 8}, arm).task.layers) == [8]
    other = _node({"task": {"lr": 0.3, "layers": [8]}, "seed": 1}, arm)  # not the template's config: built anew
    assert other.task.lr == 0.3


def test_a_task_module_is_imported_from_the_snapshot_even_after_the_live_tree_copy_replaced_it(tmp_path) -> None:
    import sys

    from ablate.trials.tasks.fn import import_callable

    snap, live = tmp_path / "snap", tmp_path / "live"
    for d, value in ((snap, "snapshot"), (live, "live tree")):
        d.mkdir()
        (d / "i25task.py").write_text(f"def run(cfg):\n    return {value!r}\n")
    try:
        assert import_callable("i25task:run", snap)(None) == "snapshot"
        assert import_callable("i25task:run", snap)(None) == "snapshot"  # the second call skips the scan
        sys.path.insert(1, str(live))
        del sys.modules["i25task"]
        import importlib

        sys.path.remove(str(snap))
        importlib.invalidate_caches()
        importlib.import_module("i25task")  # the live tree's copy now in sys.modules
        sys.path.insert(0, str(snap))
        assert import_callable("i25task:run", snap)(None) == "snapshot"  # dropped, imported from the snapshot
    finally:
        sys.modules.pop("i25task", None)
        for d in (snap, live):
            if str(d) in sys.path:
                sys.path.remove(str(d))


def test_config_yaml_from_its_template_is_the_dump_of_each_trials_config() -> None:
    from ablate.record.sweepdir import dump_yaml
    from ablate.trials.config import config_yaml

    arm = {"task": {"fn": "m:f", "lr": 0.1, "note": "seed: 3", "layers": [8, 8]}, "seeds": [0, 1], "alpha": 0.05}
    for seed in (0, 1, 17, 2**32 - 1):
        assert config_yaml(arm, {**arm, "seed": seed}) == dump_yaml({**arm, "seed": seed})
    changed = {**arm, "task": {**arm["task"], "lr": 0.2}, "seed": 4}  # not the template's config: dumped itself
    assert config_yaml(arm, changed) == dump_yaml(changed)
    app = {"task": {"app": "a.py", "params": {"seed": 5}}, "seed": 5}  # the seed twice: no template
    assert config_yaml(app, app) == dump_yaml(app)
