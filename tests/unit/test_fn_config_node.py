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
