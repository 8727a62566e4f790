"""The warm parent: one process that imports the task once and forks every trial from it (``launcher.warm=true``).

A fresh ``python`` per trial pays the interpreter's start and the task's imports (torch: 1.6-2.4 s of CPU) each
time; a fork of a process that already holds them pays neither. The pieces, in the order a launch meets them:

- :mod:`.early`: started while ablate still plans and pins, the warm parent imports the task's installed packages
  (never the project's own files, which are not pinned yet);
- :mod:`.starter`: the launcher's side (:class:`~.starter.WarmParent`): starts the parent, reads its ready report,
  refuses when forking would be unsafe, and hands out trial handles that behave like ``subprocess.Popen``;
- :mod:`.parent`: the parent process itself (``python -m ablate.trials.warm.parent``): imports the task from the
  pinned snapshot, probes learned imports in a throwaway fork, and forks one child per trial request;
- :mod:`.hazards`: what a fork cannot share (threads, sockets, CUDA, a draw from a global generator at import),
  watched while the task is imported, and named with the cheapest fix;
- :mod:`.fork`: what a trial forked from the parent knows of it (the modules it held), for the trial's manifest
  and for learning.

An ``app`` task's half of this lives with its form (:mod:`ablate.trials.tasks.app_warm`: import the app's script
in the parent, call its ``@hydra.main`` function in each fork), since one form's internals stay inside
:mod:`ablate.trials.tasks`. Used by ``launcher=local`` (one parent per launch) and by packed SLURM jobs (one per
job start, :mod:`ablate.trials.launchers.slurm.pack_job`). docs/design-notes.md draws the processes and pipes.
"""
