"""``python -m a2e_engine.engine.cli``: the ``a2e`` command."""

import sys

from a2e_engine.engine.cli._app import main

sys.exit(main())
