"""The ``ablate`` command: parse the command line, call the API or a subcommand, print (thin)."""
