"""F-GRPO where large runs happen: a verl plug-in and a TRL trainer, with this package's records.

- :mod:`fgrpo_llm.integrations.focal` and :mod:`fgrpo_llm.integrations.records` are engine-free
  (torch only): the focal weight of arbitrary, possibly ragged, groups of a flat batch, and the
  writer of the run directory that ``fgrpo-llm validate`` reads (``run.json``, ``groups.jsonl``,
  ``metrics.jsonl``; see :mod:`fgrpo_llm.evaluation.runs`).
- :mod:`fgrpo_llm.integrations.reward_check` (engine-free): the check that an engine's reward
  reads as right or wrong, run by both engines on every batch.
- :mod:`fgrpo_llm.integrations.verl` (needs verl, ``.[llm,verl]``): the ``focal_grpo``
  advantage estimator, registered through verl's ``verl.plugins`` entry points.
- :mod:`fgrpo_llm.integrations.trl` (needs TRL, ``.[llm,trl]``): ``FocalGRPOTrainer``, the
  pass@k / Delta NLL_rare callbacks, and the launcher (``python -m
  fgrpo_llm.integrations.trl.launch``, ``trl grpo`` for F-GRPO).

Nothing else in ``fgrpo_llm`` imports these sub-packages. See docs/engines.md.
"""

#: The engine-free modules (``verl`` and ``trl`` import their engine and are not listed).
__all__ = ["focal", "records", "reward_check"]
