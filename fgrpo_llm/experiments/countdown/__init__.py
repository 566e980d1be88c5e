"""The Countdown experiments (paper Sections 4-5 at CPU scale).

- ``config``: the plan (``DemoConfig``) and its runs (``RunSpec``); imports nothing from here;
- ``base``: the built-in Countdown base model (supervised, step budget);
- ``stages``: the plan's stages (pretrain, rare-correct set, train, evaluate);
- ``pipeline``: ``fgrpo-llm demo``, the whole story for one RL seed;
- ``cross_check``: the theory-vs-LLM cross-check of finished runs;
- ``report``: the demo's markdown report and figures;
- ``study``, ``study_claims``, ``study_report``, ``study_tuning``: ``fgrpo-llm study``, the plan
  over several bases and RL seeds with intervals and verdicts.
"""
