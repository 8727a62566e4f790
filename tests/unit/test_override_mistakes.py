"""Issue 35, item 16: ``seed=10`` for ``seeds=10`` under ``-m`` (5 seeds ran without a word) and a list written
without brackets (``variable.values=0.1,0.2``: a garbled fix) get one line each with a fix that works: the test
composes the fixed overrides."""

from __future__ import annotations

import pytest

from ablate.errors import ConfigError
from ablate.plan.compose import compose
from tests.helpers import REPO

CONF = str(REPO / "conf")


@pytest.mark.parametrize(("given", "fixed", "key", "want"), [
    ("seed=10", "seeds=10", "seeds", 10),
    ("seed=3", "seeds=3", "seeds", 3),
    ("+seed=7", "seeds=7", "seeds", 7),
])
def test_seed_under_m_is_refused_with_seeds(given: str, fixed: str, key: str, want: object) -> None:
    with pytest.raises(ConfigError) as err:
        compose(["variable=lr", given], config_path=CONF)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("`seed`: ") and f"Fix: `{fixed}` for" in msg
    assert compose(["variable=lr", fixed], config_path=CONF).cfg[key] == want
    assert compose(["variable=lr", given.lstrip("+")], config_path=CONF, multirun=False).cfg["seed"] == int(
        given.split("=")[1])  # a single run (no -m) trains the control with that seed, as before


@pytest.mark.parametrize(("given", "fixed", "key", "want"), [
    ("variable.values=0.1,0.2", "variable.values=[0.1,0.2]", "variable.values", [0.1, 0.2]),
    ("variable.values=0.5,1e-3,2", "variable.values=[0.5,1e-3,2]", "variable.values", [0.5, 0.001, 2]),
    ("seeds=1,2,3", "seeds=[1,2,3]", "seeds", [1, 2, 3]),
    ("metrics=val_acc,val_loss", "metrics=[val_acc,val_loss]", "metrics", ["val_acc", "val_loss"]),
])
def test_a_list_without_brackets_gets_the_bracketed_fix(given: str, fixed: str, key: str, want: object) -> None:
    with pytest.raises(ConfigError) as err:
        compose(["variable=lr", given], config_path=CONF)
    msg = str(err.value)
    assert "\n" not in msg and f"Fix: write the list in brackets: `{fixed}`." in msg
    cfg = compose(["variable=lr", fixed], config_path=CONF).cfg
    node = cfg
    for part in key.split("."):
        node = node[part]
    assert node == want


def test_a_sweep_of_another_key_still_says_declare_a_variable() -> None:
    with pytest.raises(ConfigError, match=r"is a Hydra sweep; ablate changes one declared variable"):
        compose(["variable=lr", "task.lr=0.1,0.2"], config_path=CONF)
