"""``a2e`` with a stage sampler (``benchmarks._stage_sampler``) in its process:
``python -m a2e_engine.benchmarks._profiled_serve SNAPSHOT_PATH serve --http ...``. The engine's
code is not changed for the profile: the sampler is a thread beside it."""

from __future__ import annotations

import sys

from a2e_engine.benchmarks._stage_sampler import StageSampler
from a2e_engine.engine.cli._app import main

#: How long a thread may hold the GIL while the sampler waits for it.
SWITCH_INTERVAL_S = 0.0001

if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m a2e_engine.benchmarks._profiled_serve SNAPSHOT_PATH a2e-args...")
    # The sampler can only look while it holds the GIL: without a short switch interval it
    # would only ever see the request thread where that thread lets go of it, waiting in
    # ``select``, and charge it all there.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    StageSampler(sys.argv[1]).start()
    sys.exit(main(sys.argv[2:]))
