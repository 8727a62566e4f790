"""``launcher=slurm``: trials as SLURM job arrays, through submitit (one subpackage, as submitit gives each backend).

- :mod:`.launcher`: :class:`~.launcher.SlurmLauncher`, submission and collection (``squeue``/``sacct``), from the
  sweep dir alone;
- :mod:`.job`: what runs inside a job of one trial (checkpointable: requeued on preemption or a time limit);
- :mod:`.pack` and :mod:`.pack_job`: ``launcher.trials_per_job=k``, k short trials in one job, each a fork of the
  job's warm parent (:mod:`ablate.trials.warm`);
- :mod:`.intent`: a submission intent recorded before ``sbatch``, so an array is never submitted twice;
- :mod:`.script`: the pieces of a submission both kinds share (environment lines, the cut into arrays);
- ``cluster.sh``: a local single-node SLURM cluster for the tests (docs/slurm.md).
"""
