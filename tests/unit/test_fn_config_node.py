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

    from ablate.trials.trial import resolve_config

    arm = {"task": {"lr": 0.1, "layers": [64, {"a": None}], "inf": float("inf"), "flag": True, "name": "x"},
           "launcher": {"name": "local", "max_parallel": None}, "seeds": [0, 1, 2]}
    for seed in (0, 1):
        got = resolve_config(arm, seed)
        assert got == OmegaConf.to_container(OmegaConf.create({**arm, "seed": seed}), resolve=True)
        assert got["seed"] == seed
    assert resolve_config({"a": "${b}", "b": 2}, 0)["a"] == 2  # interpolated: resolved by OmegaConf
    assert resolve_config({"a": "\\${b}", "b": 2}, 0)["a"] == "${b}"  # escaped: OmegaConf unescapes it
