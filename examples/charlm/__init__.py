"""A small character-level transformer language model trained on Python's own standard library source."""
