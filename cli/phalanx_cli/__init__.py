"""The ``phalanx`` command line: the composition of the platform, the API and the clients.

Every command lives here (:mod:`phalanx_cli.main` builds the Typer app), so no
other package imports the command line: the layers run one way only.
"""
