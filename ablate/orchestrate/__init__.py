"""Drive one ablation through its stages from the sweep dir: plan -> pin -> launch -> collect -> judge;
its options, progress, status, repro, suites' and transfer runs' entry points."""
