"""``bertology assets``: show (or install) the JavaScript the offline views and slide decks inline."""

from __future__ import annotations

import argparse

from bertology_utils.cli._command import EXIT_FAILED, EXIT_OK, Command

__all__ = ["COMMAND"]

ASSETS_DESCRIPTION = """\
The offline views (bertviz, widgets) and slide decks inline third-party JavaScript installed
from npm: `make setup` runs `npm ci` in the checkout; --install puts the same pinned versions
in the cache folder (for installs without a checkout). Without them, pages load the libraries
from CDNs (with a warning) and draw nothing offline.
"""
ASSETS_EPILOG = """\
examples:
  bertology assets               where each library was found, or that it is missing
  bertology assets --install     npm install the pinned versions into <cache>/js
Exit status: 0 every library found, 1 some missing.
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--install", action="store_true", help="install the missing libraries with npm into the cache")


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.present import assets

    if args.install and not assets.have_assets():
        print(f"installed into {assets.install()}")
    for name, asset in assets.ASSETS.items():
        path = assets.asset_path(name)
        print(f"  {name:13s} {asset.package + '@' + asset.version:40s} {path if path else 'MISSING'}")
    if not assets.have_assets():
        print(f"missing libraries: {assets.INSTALL_HINT}")
        return EXIT_FAILED
    return EXIT_OK


COMMAND = Command(
    "assets",
    "show (or install) the JavaScript the offline views and slide decks inline",
    _add_arguments,
    _handle,
    ASSETS_EPILOG,
    ASSETS_DESCRIPTION,
)
