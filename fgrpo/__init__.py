"""fgrpo: a toolkit for F-GRPO, the focal-weighted group-relative RL method of "F-GRPO: Don't
Let Your Policy Learn the Obvious and Forget the Rare" (arXiv 2602.06717).

The distribution ``fgrpo`` installs three import packages; this one only names them:

- ``fgrpo_theory`` (``fgrpo.theory``): the closed forms, the categorical policy model, the
  simulator and the forecast (numpy / scipy, no torch);
- ``fgrpo_llm`` (``fgrpo.llm``): the trainer, the evaluation, the experiments and the TRL / verl
  integrations (torch, the ``llm`` extra);
- ``fgrpo_common``: what both use.

    import fgrpo
    fgrpo.__version__
    fgrpo.theory.p_tail_miss(mu=0.3, tau=0.015, N=8)
"""

from importlib import import_module

from fgrpo_common import __version__

__all__ = ["__version__", "theory", "llm"]

_PACKAGES = {"theory": "fgrpo_theory", "llm": "fgrpo_llm"}


def __getattr__(name: str):
    """``fgrpo.theory`` and ``fgrpo.llm``, imported on first use (``llm`` needs torch)."""
    if name in _PACKAGES:
        return import_module(_PACKAGES[name])
    raise AttributeError(f"module 'fgrpo' has no attribute {name!r}")
