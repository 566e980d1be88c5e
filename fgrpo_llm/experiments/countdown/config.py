"""The plan of the CPU-scale Countdown experiments: its configuration (``DemoConfig``) and its runs
(``RunSpec``: the core, the group-size sweep and the extended plan). Imports nothing from its
package; the stages that carry the plan out are ``fgrpo_llm.experiments.countdown.stages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from fgrpo_common.fields import (
    SEED,
    Boolean,
    Integer,
    Mapping,
    Optional,
    Real,
    Sequence,
    Text,
    check_fields,
    dataclass_from_dict,
)
from fgrpo_llm.config import read_config_file


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of every stage of the plan; saved resolved to OUT/demo_config.json (the demo) or
    inside OUT/study_config.json (the study). The defaults are the study's plan; the demo starts
    from them with :data:`DEMO_PLAN` applied (``load_demo_config(for_demo=True)``)."""

    seed: int = 0
    """Seed of pretraining, rare-set sampling and evaluation, and the RL seed of the demo's runs
    (the study, ``fgrpo_llm.experiments.countdown.study``, trains the same plan for several RL
    seeds)."""
    device: str | None = None
    """"cpu", "cuda" or None (CUDA when available)."""
    theory: bool = True
    """Run the theory stage (tail-miss figures and the categorical regime sweep)."""
    theory_fast: bool = False
    """Draw the closed-form tail-miss figures on the theory demo's coarse grid."""
    regime_sweep_fast: bool = True
    """Categorical regime sweep on the simulator's "tiny" preset (seconds) rather than "small"."""
    pretrain_seconds: float = 0.0
    """Optional wall-clock cap on base-model pretraining (0, the default: none). The step budget
    ``PretrainConfig.max_steps`` (600) decides the base; a base stopped by a cap says so in the
    report, since it then depends on the machine's speed."""
    pretrain_overrides: dict = field(default_factory=dict)
    """Further ``PretrainConfig`` fields (e.g. hidden_size, max_steps)."""
    rare_prompts: int = 256
    """P: training prompts of the rare-correct set (paper: 256)."""
    rare_rollouts: int = 100
    """M: base rollouts per prompt (paper: 800; fewer here so that more prompts, 256, cover more
    training groups in the tail-miss check at the same sampling cost)."""
    rare_top_fraction: float = 0.01
    """q: fraction of the correct rollouts kept, highest NLL first (paper: 0.01)."""
    steps: int = 150
    """Training steps of every run (the sweep uses the same number: "same steps")."""
    prompts_per_step: int = 32
    """B: prompts per training step."""
    group_size: int = 8
    """N of the main GRPO / F-GRPO comparison (paper: 8)."""
    gamma: float = 1.0
    """Focal exponent of the F-GRPO run (the paper's main tables use 0.5 or 1)."""
    lr: float = 1e-4
    """AdamW learning rate of RL training (our CPU-scale setting; the paper's 1e-6 is for 7B
    models)."""
    sweep_group_sizes: tuple = (2, 4, 16, 32)
    """Extra GRPO group sizes of the sweep (the demo's default: (2, 4, 16), see
    :data:`DEMO_PLAN`)."""
    lr_matched_control: bool = True
    """Also train GRPO at N = ``group_size`` with lr * m_gamma (``lr_match_gamma = gamma``;
    m_1 = 0.5, m_0.5 = 0.679), the paper's low-LR control (Table 3): the focal weight shrinks the
    average update to about m_gamma of GRPO's, and this run tells a smaller step apart from the
    focal reweighting. Skipped when gamma = 0 (m_0 = 1: it would repeat the GRPO run)."""
    extended_gammas: tuple = (0.5, 2.0)
    """F-GRPO exponents of the extended plan beside gamma (paper Table 6: 0.5 and 1 good, larger
    ones not)."""
    entropy_coef: float = 1e-3
    """Entropy-bonus coefficient of the extended plan's GRPO + entropy baseline (paper Table 3:
    1e-3 after tuning over {1e-4, 1e-3}); a study with a tuning base replaces it by the value
    chosen from ``entropy_grid`` (``fgrpo_llm.experiments.countdown.study_tuning``)."""
    kl_coef: float = 1e-3
    """KL-penalty coefficient of the extended plan's GRPO + KL baseline (paper Table 3: 1e-3 after
    tuning over {1e-3, 1e-2}); a study with a tuning base replaces it by the value chosen from
    ``kl_grid``."""
    entropy_grid: tuple = (1e-4, 1e-3)
    """Entropy-bonus coefficients a study's tuning base tries (paper Table 3's grid)."""
    kl_grid: tuple = (1e-3, 1e-2)
    """KL-penalty coefficients a study's tuning base tries (paper Table 3's grid)."""
    blind_group_sizes: tuple = (32,)
    """Group sizes of the sweep no base trained before the forecast: a study trains them on every
    base as blind cells (``study_cells``), the others on its ``sweep_bases`` as published ones."""
    lr_frontier: tuple = (0.9, 0.75)
    """GRPO lr scales of the lr frontier beside x 1 and the control's x m_gamma (claim 5: F-GRPO
    against GRPO at the lr scale that loses as much rare likelihood; the study's blind cells)."""
    blind_gammas: tuple = (0.25, 3.0)
    """F-GRPO exponents at N = ``group_size`` the study adds as blind cells (paper Table 6's
    range, on both sides of the extended plan's)."""
    revisit_visits: int = 4
    """Visits per prompt of the revisit arm: GRPO and F-GRPO at N = ``group_size`` train on the
    first max(rare_prompts, steps x prompts_per_step / revisit_visits) training problems (1,200:
    the rare set's 256 prompts among them), so each prompt is trained about this many times in
    the same steps (the paper's runs revisit their prompts, App. L Table 5); 0: no revisit
    arm."""
    prediction_preset: str = "small"
    """Simulator preset (``fgrpo_theory.sim``) of the weighting comparison's prediction."""
    eval_every: int = 25
    """Steps between Delta NLL_rare evaluations during training."""
    train_overrides: dict = field(default_factory=dict)
    """Further ``TrainConfig`` fields applied to every run (e.g. rollout_batch_size, dtype)."""
    eval_n: int = 64
    """Samples per problem for pass@k (paper: 1024)."""
    eval_max_problems: int | None = 100
    """Problems per evaluation split (None: all)."""
    max_new_tokens: int = 16
    """Completion token limit (sampling, training and evaluation)."""
    batch_size: int = 2048
    """Sequences decoded at once in evaluation and rare-set sampling."""
    early_steps: int = 50
    """Early window of the tail-miss check (the policy is still near the base there)."""
    workers: int = 2
    """Training runs (each followed by its pass@k evaluation) in parallel processes. The numbers do
    not depend on it: every run is a function of its seed and settings alone."""
    threads: int = 1
    """torch intra-op threads of every stage and of every worker, whatever ``workers`` is: a float
    sum split over another number of threads rounds differently and changes the samples."""
    paper_results: str | None = None
    """Path of paper_results.json (None: the copy shipped in ``fgrpo_llm/experiments/``)."""

    def __post_init__(self):
        check_fields(self, DEMO_RULES)  # every field's type and range (fgrpo_common.fields)
        fixed = sorted(set(self.train_overrides) & PLAN_FIELDS)
        if fixed:
            raise ValueError(
                f"train_overrides must not set what the plan sets per run, got {fixed} (the "
                "plan's gamma, entropy_coef and kl_coef fields set them)"
            )

    @classmethod
    def from_dict(cls, data: dict) -> DemoConfig:
        return dataclass_from_dict(cls, data, what="demo config")


#: TrainConfig fields each run of the plan sets itself (``train_config_for``).
PLAN_FIELDS = frozenset(
    {"gamma", "weighting", "entropy_coef", "kl_coef", "group_size", "lr_match_gamma", "seed",
     "base", "out"}
)  # fmt: skip

#: Type and range of every DemoConfig field.
DEMO_RULES = {
    "seed": SEED,
    "device": Optional(Text()),
    "theory": Boolean(),
    "theory_fast": Boolean(),
    "regime_sweep_fast": Boolean(),
    "pretrain_seconds": Real(0),
    "pretrain_overrides": Mapping(),
    "rare_prompts": Integer(1),
    "rare_rollouts": Integer(1),
    "rare_top_fraction": Real(0, 1, open_low=True),
    "steps": Integer(1),
    "prompts_per_step": Integer(1),
    "group_size": Integer(2),
    "gamma": Real(0),
    "lr": Real(0, open_low=True),
    "sweep_group_sizes": Sequence(Integer(2), nonempty=False),
    "lr_matched_control": Boolean(),
    "extended_gammas": Sequence(Real(0), nonempty=False),
    "entropy_coef": Real(0, open_low=True),
    "kl_coef": Real(0, open_low=True),
    "entropy_grid": Sequence(Real(0, open_low=True), distinct=True),
    "kl_grid": Sequence(Real(0, open_low=True), distinct=True),
    "blind_group_sizes": Sequence(Integer(2), nonempty=False),
    "lr_frontier": Sequence(
        Real(0, 1, open_low=True, open_high=True), nonempty=False, distinct=True
    ),
    "blind_gammas": Sequence(Real(0, open_low=True), nonempty=False, distinct=True),
    "revisit_visits": Integer(0),
    "prediction_preset": Text(),
    "eval_every": Integer(0),
    "train_overrides": Mapping(),
    "eval_n": Integer(1),
    "eval_max_problems": Optional(Integer(1)),
    "max_new_tokens": Integer(1),
    "batch_size": Integer(1),
    "early_steps": Integer(0),
    "workers": Integer(1),
    "threads": Integer(1),
    "paper_results": Optional(Text()),
}


#: Settings of how the plan is executed, not of what it computes: left out of the reports.
EXECUTION_FIELDS = ("workers",)

#: The demo's departures from the study's plan (the DemoConfig defaults): no GRPO run at N = 32.
#: That run alone (905 s on 2 lightly loaded cores, about twice the N = 16 run) takes longer than
#: the rest of the demo's training on 2 workers (482 s on 2 idle cores); without it a fresh clone's
#: `make demo` took 14.4 minutes on 2 idle cores, within the 20 it is allowed. Every run the
#: demo keeps has the study's settings, so the demo's runs are the study's seed-0 runs (same seed,
#: same numbers), and the study's report covers N = 32 (claims 1 and 6). Put it back with
#: ``sweep_group_sizes: [2, 4, 16, 32]`` in a ``--config`` file.
DEMO_PLAN = dict(sweep_group_sizes=(2, 4, 16))

#: The test-suite preset: every stage, tiny budgets (well under a minute on one core).
FAST = dict(
    theory_fast=True,
    regime_sweep_fast=True,
    pretrain_overrides={
        "hidden_size": 32,
        "num_layers": 2,
        "num_heads": 2,
        "eval_prompts": 4,
        "eval_samples": 2,
        "batch_size": 32,
        "warmup_steps": 2,
        "max_steps": 40,
    },
    rare_prompts=8,
    rare_rollouts=16,
    rare_top_fraction=0.05,
    prediction_preset="tiny",
    steps=3,
    prompts_per_step=4,
    group_size=4,
    sweep_group_sizes=(2,),
    blind_group_sizes=(),
    eval_every=2,
    eval_n=4,
    eval_max_problems=4,
    max_new_tokens=8,
    batch_size=256,
    early_steps=2,
    workers=1,
    train_overrides={"warmup_steps": 1, "checkpoint_every": 0, "progress": False},
)


def load_demo_config(
    path=None, *, fast: bool = False, for_demo: bool = False, **overrides
) -> DemoConfig:
    """Defaults (the study's plan; with ``for_demo`` the demo's, :data:`DEMO_PLAN`; with ``fast``
    the FAST preset), then the YAML/JSON file, then keyword overrides."""
    data = dict(FAST) if fast else dict(DEMO_PLAN) if for_demo else {}
    if path is not None:
        data.update(read_config_file(path))
    data.update({k: v for k, v in overrides.items() if v is not None})
    return DemoConfig.from_dict(data)


class RunSpec(NamedTuple):
    """One training run of the plan."""

    name: str
    """Row name stem (``grpo_n8``, ``fgrpo_n8``, ``grpo_n8_lrmatched``, ...)."""
    N: int
    """Group size."""
    gamma: float
    """Focal exponent (0: GRPO)."""
    lr_match_gamma: float | None = None
    """Train at lr * m_gamma for this gamma (the low-LR control), or None for lr."""
    seed: int = 0
    """RL seed: sampling, prompt order and mini-batch shuffling of the run."""
    dir: str = ""
    """Run directory relative to OUT (default: ``name``)."""
    weighting: str = "focal"
    """The trainer's weighting: "focal" (gamma) or "maxrl"."""
    entropy_coef: float = 0.0
    kl_coef: float = 0.0
    lr_scale: float = 1.0
    """Multiplies the plan's lr (the lr frontier's GRPO runs: x 0.9, x 0.75)."""
    prompt_pool: int | None = None
    """Train on the first P training problems only (the revisit arm), or None for all."""

    @property
    def path(self) -> str:
        return self.dir or self.name


def revisit_pool(cfg: DemoConfig) -> int:
    """P of the revisit arm: steps x B / visits prompts, and at least the rare set's (the pool is
    the first P training problems, the rare set's prompts the first ``rare_prompts``)."""
    return max(cfg.rare_prompts, cfg.steps * cfg.prompts_per_step // max(cfg.revisit_visits, 1))


def blind_specs(cfg: DemoConfig, *, seed: int | None = None, prefix: str = "") -> list[RunSpec]:
    """The cells added after the forecast, on one (base, RL seed): GRPO at N = ``group_size`` at
    every scale of ``lr_frontier``; F-GRPO at every gamma of ``blind_gammas``; the revisit arm
    (GRPO and F-GRPO on a pool of :func:`revisit_pool` prompts). The group-size sweep's blind
    part is the plan's own ``grpo_n{N}`` runs (``run_specs``) on the bases that had not trained
    it."""
    seed = cfg.seed if seed is None else seed
    N, pool = cfg.group_size, revisit_pool(cfg)

    def spec(name, gamma=0.0, **kw):
        return RunSpec(name, N, float(gamma), None, seed, f"{prefix}{name}", **kw)

    specs = [spec(f"grpo_n{N}_lr{s:g}", lr_scale=float(s)) for s in cfg.lr_frontier]
    specs += [spec(f"fgrpo_n{N}_g{g:g}", g) for g in cfg.blind_gammas if float(g) != cfg.gamma]
    if cfg.revisit_visits:
        specs += [
            spec(f"grpo_n{N}_pool{pool}", prompt_pool=pool),
            spec(f"fgrpo_n{N}_pool{pool}", cfg.gamma, prompt_pool=pool),
        ]
    return specs


def run_specs(cfg: DemoConfig, *, seed: int | None = None, prefix: str = "") -> list[RunSpec]:
    """The plan: GRPO and F-GRPO at N = ``group_size``, the learning-rate-matched control, then the
    rest of the GRPO group-size sweep, smallest N first; RL seed ``seed`` (default ``cfg.seed``),
    run directories under ``prefix``."""
    seed = cfg.seed if seed is None else seed
    N = cfg.group_size
    specs = [(f"grpo_n{N}", N, 0.0, None), (f"fgrpo_n{N}", N, cfg.gamma, None)]
    if cfg.lr_matched_control and cfg.gamma > 0:
        specs.append((f"grpo_n{N}_lrmatched", N, 0.0, cfg.gamma))
    specs += [(f"grpo_n{n}", n, 0.0, None) for n in sorted(cfg.sweep_group_sizes) if n != N]
    return [
        RunSpec(name, n, g, lr_g, seed, f"{prefix}{name}" if prefix else "")
        for name, n, g, lr_g in specs
    ]


def extended_specs(cfg: DemoConfig, *, seed: int | None = None, prefix: str = "") -> list[RunSpec]:
    """The extended plan at N = ``group_size``: MaxRL, GRPO with the entropy bonus, GRPO with
    the KL penalty (paper Table 3's regularised baselines) and F-GRPO at the other exponents of
    ``extended_gammas`` (Table 6)."""
    seed = cfg.seed if seed is None else seed
    N = cfg.group_size

    def spec(name, **kw):
        return RunSpec(name, N, kw.pop("gamma", 0.0), None, seed, f"{prefix}{name}", **kw)

    specs = [
        spec(f"maxrl_n{N}", weighting="maxrl"),
        spec(f"grpo_n{N}_entropy", entropy_coef=cfg.entropy_coef),
        spec(f"grpo_n{N}_kl", kl_coef=cfg.kl_coef),
    ]
    specs += [
        spec(f"fgrpo_n{N}_g{g:g}", gamma=float(g))
        for g in cfg.extended_gammas
        if float(g) != float(cfg.gamma) and g > 0
    ]
    return specs
