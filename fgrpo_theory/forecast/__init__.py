"""The categorical theory as a forecast of an LLM run (paper Section 2.3, Eq. 5 and Eq. 11-13,
applied per prompt over a task's enumerated answers, with logits tied along a prefix tree as an
autoregressive model ties them). See docs/forecast.md.

- ``answers``: a prompt's enumerated answer distribution, the input every forecast starts from;
- ``tree``: the prompts' prefix forest (per-prompt and shared logits, the malformed outcome);
- ``policy``: log-probabilities and the exact policy gradient, vectorised;
- ``optim``: SGD / AdamW on the tables;
- ``train``: one cell replayed on an LLM run's schedule, and its predictions;
- ``fit``: the two step sizes fitted to measured runs, and the null models;
- ``report``: ``forecast.json``.
"""

from fgrpo_theory.forecast.answers import PromptAnswers, malformed_logp
from fgrpo_theory.forecast.fit import (
    FitResult,
    FitUnit,
    fit_lr_only,
    fit_step_sizes,
    fit_untied,
    predict_cells,
    predict_constant,
    predict_lr_only,
)
from fgrpo_theory.forecast.optim import Optimizer
from fgrpo_theory.forecast.report import MODEL, read_forecast, write_forecast
from fgrpo_theory.forecast.train import (
    Forecast,
    ForecastBase,
    RunSchedule,
    Trained,
    evaluate,
    forecast,
    train_once,
)
from fgrpo_theory.forecast.tree import END, MALFORMED, SHARING, Forest, build_forest

__all__ = [
    "PromptAnswers",
    "malformed_logp",
    "Optimizer",
    "FitResult",
    "FitUnit",
    "fit_lr_only",
    "fit_step_sizes",
    "fit_untied",
    "predict_cells",
    "predict_constant",
    "predict_lr_only",
    "MODEL",
    "read_forecast",
    "write_forecast",
    "Forecast",
    "ForecastBase",
    "RunSchedule",
    "Trained",
    "evaluate",
    "forecast",
    "train_once",
    "END",
    "MALFORMED",
    "Forest",
    "build_forest",
    "SHARING",
]
