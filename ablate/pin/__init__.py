"""Pin what must not differ between trials: git commit and code snapshot, DVC hashes and content digests
of the data, the environment; and verify those pins."""
