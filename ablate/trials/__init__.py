"""Run trials: launchers (inline, local with its warm parent, SLURM with packing), the trial process,
task forms, seeding and determinism, process isolation."""
