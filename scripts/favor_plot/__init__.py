"""scripts/plot.py's figures, one module per kind (see plot.py's docstring for the command line)."""
