"""The porter command line: typer commands that parse, call a service (:mod:`porter.services`),
render and exit with the judgement's code. ``app`` is the typer app, ``main`` the console entry point."""

from porter.cli.app import app, main

__all__ = ["app", "main"]
