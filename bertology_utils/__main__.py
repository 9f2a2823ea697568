"""``python -m bertology_utils``: the ``bertology`` command."""
from .cli import main

raise SystemExit(main())
