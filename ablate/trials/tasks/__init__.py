"""The task forms: how one trial runs the user's code (``fn``, ``command``, ``app``)."""
