"""The experiments built on the core and the evaluation layer.

- ``countdown/``: the Countdown plan, ``fgrpo-llm demo`` and ``fgrpo-llm study``;
- ``maze/``: the Maze single-solution experiment (Section 5.2, Table 4), ``fgrpo-llm maze``;
- ``runner``: the one process pool (spawned, longest first, queue cancelled on failure), JSON
  writing and CPU time, shared by both;
- ``claims``: what the verdicts of both studies share;
- ``paper``: the paper's published numbers (shipped as ``paper_results.json``), for side-by-side
  tables.
"""
