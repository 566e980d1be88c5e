"""The Maze single-solution experiment (paper Section 5.2, Appendix K, Table 4).

- ``config``: ``MazeConfig``, its presets and flags, the runs (``plan``); imports nothing from here;
- ``stages``: SFT, held-out evaluation, one RL run, the pass@k curve;
- ``pipeline``: ``fgrpo-llm maze`` for one SFT model (the runs in parallel processes, resumable);
- ``study``: the statistics (intervals, paired differences) and ``summarize``;
- ``study_claims``: the paper's claims (a)-(d) and their judges;
- ``report``: the Table-4-shaped table and the report (words; tables via ``experiments.tables``);
- ``bases``: the experiment over several SFT models (the base as a random factor);
- ``units``: the per-unit table units.csv and the claims judged again from it alone;
- ``plots``: the figures.
"""
