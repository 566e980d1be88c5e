"""The categorical theory as a forecast of an LLM run (paper Section 2.3, Eq. 5, applied per
prompt over a task's enumerated answers).

``answers``: a prompt's enumerated answer distribution, the input every forecast starts from.
"""

from fgrpo_theory.forecast.answers import PromptAnswers, malformed_logp

__all__ = ["PromptAnswers", "malformed_logp"]
