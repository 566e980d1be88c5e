"""The experiments built on the core and the evaluation layer.

- ``countdown_base``: the built-in Countdown base model (supervised, step budget);
- ``plan``: the plan of the CPU-scale LLM experiments and its stages;
- ``demo``: ``fgrpo-llm demo``, the whole story for one RL seed;
- ``study``: ``fgrpo-llm study``, the plan over several RL seeds with intervals and verdicts;
- ``maze``: the Maze single-solution experiment (Section 5.2, Table 4);
- ``cross_check``: the theory-vs-LLM cross-check of finished runs;
- ``report``: markdown for the reports;
- ``paper``: the paper's published numbers (shipped as ``paper_results.json``), for side-by-side
  tables.
"""
