"""``python -m bertology_utils``: the ``bertology`` command."""

from bertology_utils.cli import main

# Guarded: worker processes started by spawn (a local Dask cluster) import this module again.
if __name__ == "__main__":
    raise SystemExit(main())
