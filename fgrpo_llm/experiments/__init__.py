"""The experiments built on the core and the evaluation layer.

- ``countdown/``: the Countdown plan, ``fgrpo-llm demo`` and ``fgrpo-llm study``;
- ``maze/``: the Maze single-solution experiment (Section 5.2, Table 4), ``fgrpo-llm maze``;
- ``runner``: tasks each in a spawned process of its own, under its own environment variables
  (longest first, queue cancelled on failure), shared by both (the worker pool, the JSON writer
  and the timer are ``fgrpo_common``'s);
- ``claims``: what the verdicts of both studies share;
- ``paper``: the paper's published numbers (shipped as ``paper_results.json``), for side-by-side
  tables.
"""
