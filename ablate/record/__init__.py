"""The sweep dir on disk: every path, atomic writes, the results table, the verdict reuse key.
Knows nothing of how a verdict is judged."""
