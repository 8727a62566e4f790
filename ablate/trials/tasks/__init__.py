"""The task forms: how one trial runs the user's code (``fn``, ``command``, ``app``).

Outside this package, code uses the forms through :mod:`ablate.trials.tasks.interface` only (and
:mod:`ablate.trials.tasks.contract` for the shared types alone); no other module imports one form's module, which an
import-linter contract checks. This file imports nothing: :mod:`ablate.trials.tasks.hydra_callback` runs inside
an app's own process and must not load ablate's task machinery there.
"""
