"""The ``ablate`` command: parse the command line, call the API or a subcommand, print (thin).

Its modules import the pipeline inside the functions that run it: ``ablate --help`` and a subcommand start
without Hydra, OmegaConf, numpy, scipy or the stages they do not use (``benchmarks/cli_startup.py``).
"""
