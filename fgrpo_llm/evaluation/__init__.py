"""Evaluation of trained policies and of the theory on their runs.

- ``passk``: unbiased pass@k per split from n samples per problem (App. P), the paired m-out-of-n
  subsampling test (App. Q);
- ``rare``: the 1% rare-correct set and Delta NLL_rare (App. M.2), per-prompt (mu, tau);
- ``exact``: exact base (mu, tau) for tasks that can enumerate their correct answers;
- ``runs``: reading a run directory of any engine (``run.json``, ``groups.jsonl``);
- ``tail_miss``: observed tail misses against Lemma 3.1;
- ``sweep``: the group-size sweep table (Table 2) and the learning-rate-matched control (Table 3);
- ``stats``: intervals over seeds, paired differences, verdicts.
"""
