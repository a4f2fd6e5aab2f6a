"""SandboxFusion's dataset types, each judged as its class judges a completion (bytedance/
SandboxFusion 469de08, ``sandbox/datasets``), written anew: the prompt a row gives, the program a
completion becomes, how it runs and what the answer says. One module a class (or family);
``_base`` holds what they share, ``_registry`` names them.

- ``_common_oj``: ``CommonOJDataset`` (stdin/stdout cases, run side by side);
- ``_function_tests``: ``HumanEvalDataset`` and ``MultiPLEDataset``;
- ``_mbpp``: ``MBPPDataset``;
- ``_mbxp``: ``MBXPDataset`` (MBXP, HumanEval-DS and OODTest rows);
- ``_autoeval``: ``AutoEvalDataset``;
- ``_cruxeval``: ``CruxEvalDataset`` (and CRUXEval-X's submissions);
- ``_live_code_bench``: ``LiveCodeBenchDataset``, judged by grading's asset ``lcb_judge.py`` in
  the sandbox, its packed test cases read by ``_literal_pickle``.

A dataset reads its rows from ``config.provided_data`` only: the engine keeps no tables. A row
without a column its class reads is a 400 that names it (SandboxFusion's server answers a 500
with the ``KeyError``).
"""
