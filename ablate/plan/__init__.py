"""Plan an ablation (pure, no I/O): compose the config with Hydra, derive the arms, prove each treatment
differs from control only in the variable, render overrides."""
