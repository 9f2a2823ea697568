"""The bertology command."""
from bertology_utils.cli.main import main

__all__ = ["main"]
