"""``python -m bertology_utils``: the ``bertology`` command."""

from bertology_utils.cli import main

raise SystemExit(main())
