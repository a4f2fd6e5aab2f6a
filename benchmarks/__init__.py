"""Measurements of the engine beside its alternatives, run as commands: ``a2e bench``
(``bench``, found by its entry point) and ``python -m a2e_engine.benchmarks.<command>`` for
``compare``, ``bounds``, ``layer_costs``, ``layer_throughput``, ``load``, ``ray_scaling``,
``sandboxfusion_standin`` and ``tool_search``. The modules they share are private; nothing of
the engine imports this package (``tests/test_import_graph.py``)."""
