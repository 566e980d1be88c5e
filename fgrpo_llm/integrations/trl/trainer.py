"""``FocalGRPOTrainer``: TRL's ``GRPOTrainer`` with the focal weight g = (1 - X/N)^gamma (Eq. 13).

Where the weight enters. TRL scores the completions of each process, gathers the rewards of all
processes (``_calculate_rewards`` returns the gathered (P * B, F) matrix, one column per reward
function), normalises them per group of ``num_generations`` consecutive rows, and only then keeps
its own slice of rows. A group may straddle two processes, so g must come from the gathered
rewards: this trainer keeps the gathered matrix, computes every group's X and g from it
(:func:`local_focal_weights`), and multiplies its own slice of TRL's advantages by the matching
slice of g. Nothing else changes (rewards, clipping, importance weights).

Which reward decides correctness. X counts the completions that the verifier accepts, so it
comes from one reward function's column alone (``focal_correct_reward``: the function's name as
TRL reports it, or its index), never from the weighted sum: with a format reward beside an
accuracy reward, every well-formatted wrong answer would count as correct. With one reward
function it is that one; with several the setting is required.

It also writes the run records of the tail-miss cross-check (``run.json``, ``groups.jsonl``;
:mod:`fgrpo_llm.integrations.records`) from the main process, with the prompt ids of the
dataset's ``prompt_id`` column (:func:`task_dataset` makes one from a task).

Conventions (``method_args``): TRL's ``loss_type="dapo"`` is this package's token-mean over the
whole batch; GRPO is ``epsilon = epsilon_high = 0.2``, DAPO ``epsilon_high = 0.28`` (TRL has no
dynamic sampling: all-equal groups get A = 0 but stay in the batch), CISPO ``loss_type="cispo"``
with ``epsilon_high = 6.0``: TRL's CISPO clamps the weight to ``[0, epsilon_high]`` (an absolute
cap, not ``1 + eps``), and its default 0.2 would scale the whole on-policy gradient by 0.2.
TRL's advantage eps is 1e-4 (ours and verl's 1e-6); both use the Bessel std.
"""

from __future__ import annotations

import functools
import os
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
import trl.trainer.grpo_trainer as _grpo_module
from accelerate.utils import gather_object
from trl import GRPOConfig, GRPOTrainer

from fgrpo_common.checks import is_finite_number
from fgrpo_llm.environment import environment
from fgrpo_llm.integrations.focal import (
    FocalSettings,
    correct_mask,
    focal_metrics,
    group_weights,
)
from fgrpo_llm.integrations.records import RunRecorder, row_forms, text_prompt_id
from fgrpo_llm.integrations.reward_check import RewardCheck
from fgrpo_llm.integrations.trl.callbacks import trl_sampling
from fgrpo_llm.integrations.trl.version import TESTED_TRL, check_trl_version
from fgrpo_llm.tasks import chat_messages

__all__ = [
    "RUN_RECORDS_DIR",
    "FocalGRPOConfig",
    "FocalGRPOTrainer",
    "gathered_focal_weights",
    "local_focal_weights",
    "method_args",
    "task_dataset",
    "task_reward_func",
]

#: Where the run records go by default, inside ``output_dir``: a name that ``push_to_hub`` leaves
#: out (transformers uploads ``output_dir`` with ``ignore_patterns=["_*", "checkpoint-*"]``), so
#: the records stay with the run and never reach the Hub with the model.
RUN_RECORDS_DIR = "_fgrpo_run"

_METHODS = {
    "grpo": dict(loss_type="dapo", epsilon=0.2, epsilon_high=0.2, beta=0.0, scale_rewards="group"),
    "dapo": dict(loss_type="dapo", epsilon=0.2, epsilon_high=0.28, beta=0.0, scale_rewards="group"),
    "cispo": dict(loss_type="cispo", epsilon_high=6.0, beta=0.0, scale_rewards="group"),
}


def method_args(algo: str) -> dict:
    """``GRPOConfig`` keyword arguments that make TRL's loss this package's GRPO / DAPO / CISPO."""
    if algo not in _METHODS:
        raise ValueError(f"algo must be one of {sorted(_METHODS)}, got algo={algo!r}")
    return dict(_METHODS[algo])


@dataclass
class FocalGRPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the focal settings and where the run records go."""

    focal_gamma: float = field(
        default=0.0, metadata={"help": "Focal exponent gamma >= 0 (0: plain GRPO)."}
    )
    focal_reward_correct: float = field(
        default=1.0, metadata={"help": "Reward of a correct completion."}
    )
    focal_reward_wrong: float = field(
        default=0.0, metadata={"help": "Reward of a wrong completion."}
    )
    focal_correct_threshold: float | None = field(
        default=None,
        metadata={
            "help": "Reward of focal_correct_reward at or above which a completion is correct "
            "(default: halfway between focal_reward_wrong and focal_reward_correct)."
        },
    )
    focal_correct_reward: str | None = field(
        default=None,
        metadata={
            "help": "The reward function that decides correctness (its name, as in TRL's "
            "rewards/<name> metrics, or its index in reward_funcs, e.g. '1'); required with "
            "several. Several verifiers that each score their own rows and return None for the "
            "others (a multi-task dataset): their names separated by commas, e.g. 'math,code'; "
            "a row is correct when one of them says so."
        },
    )
    focal_weighting: str = field(
        default="focal",
        metadata={
            "help": "The weighting w(mu_hat): focal (g = (1 - mu_hat)^gamma with focal_gamma), "
            "'focal:GAMMA', none (GRPO) or maxrl (g = sqrt((1 - mu_hat) / mu_hat))."
        },
    )
    focal_algo: str = field(
        default="grpo", metadata={"help": "grpo, dapo or cispo: the run.json label."}
    )
    focal_lr_scale: float = field(
        default=1.0, metadata={"help": "lr / configured lr (the lr-matched control)."}
    )
    focal_run_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where run.json / groups.jsonl / metrics.jsonl go (default: "
            f"<output_dir>/{RUN_RECORDS_DIR}, which push_to_hub leaves out; '' disables)."
        },
    )
    focal_strict_rewards: bool = field(
        default=False,
        metadata={
            "help": "Stop with an error (instead of one warning) when the verifier's rewards are "
            "neither focal_reward_wrong nor focal_reward_correct, or when every group's weight is "
            "0 while TRL's advantages are not."
        },
    )
    focal_prompt_id_column: str = field(
        default="prompt_id", metadata={"help": "Dataset column of prompt ids."}
    )

    def __post_init__(self):
        super().__post_init__()
        self.focal_settings()  # validates
        lr_scale = self.focal_lr_scale
        if not is_finite_number(lr_scale) or not lr_scale > 0:
            raise ValueError(f"focal_lr_scale must be a finite number > 0, got {lr_scale!r}")
        if self.focal_algo not in _METHODS:
            raise ValueError(
                f"focal_algo must be one of {sorted(_METHODS)}, got focal_algo={self.focal_algo!r}"
            )
        self._warn_if_not_the_labelled_method()

    def _warn_if_not_the_labelled_method(self) -> None:
        """``focal_algo`` only labels the run (run.json); TRL's loss is what the GRPOConfig fields
        say. A field that differs from ``method_args(focal_algo)`` gets one warning naming it."""
        differ = []
        for key, want in _METHODS[self.focal_algo].items():
            have = getattr(self, key)
            if key == "epsilon_high" and have is None:  # TRL: the same as epsilon
                have = self.epsilon
            if have != want:
                differ.append(f"{key}={have!r} (its: {want!r})")
        if differ:
            warnings.warn(
                f"focal_algo={self.focal_algo!r} records the run as {self.focal_algo.upper()}, "
                f"but TRL will train with {', '.join(differ)}; pass "
                f"**method_args({self.focal_algo!r}) for that method's loss",
                stacklevel=4,  # the caller of the dataclass's __init__
            )

    def focal_settings(self) -> FocalSettings:
        """The focal settings, checked as given (a bool is not taken for 1.0)."""
        return FocalSettings(
            gamma=self.focal_gamma,
            reward_correct=self.focal_reward_correct,
            reward_wrong=self.focal_reward_wrong,
            correct_threshold=self.focal_correct_threshold,
            weighting=str(self.focal_weighting),
            strict_rewards=self.focal_strict_rewards,
        )

    def focal_records_dir(self) -> str | None:
        """The run records' directory: ``focal_run_dir``, by default ``<output_dir>/_fgrpo_run``
        (:data:`RUN_RECORDS_DIR`); None when disabled (``focal_run_dir=''``)."""
        if self.focal_run_dir is None:
            return os.path.join(self.output_dir, RUN_RECORDS_DIR)
        return self.focal_run_dir or None


def correct_reward_index(choice, names: list[str]) -> int:
    """The column of the reward function that decides correctness: ``choice`` (a name in
    ``names``, or an index), or the only function when there is one."""
    F = len(names)
    if choice is None:
        if F == 1:
            return 0
        raise ValueError(
            f"focal_correct_reward is required with {F} reward functions {names}: name the one "
            "that decides correctness (the verifier), e.g. focal_correct_reward="
            f"{names[-1]!r}; X counts its correct completions"
        )
    if isinstance(choice, bool) or not isinstance(choice, (int, str)):
        raise ValueError(
            f"focal_correct_reward must be a reward function's name or index, got {choice!r}"
        )
    if isinstance(choice, str) and choice.strip().isdigit() and choice not in names:
        choice = int(choice)  # an index given as text (the command line)
    if isinstance(choice, int):
        if not 0 <= choice < F:
            raise ValueError(
                f"focal_correct_reward={choice} is not an index of the {F} reward functions {names}"
            )
        return choice
    hits = [i for i, n in enumerate(names) if n == choice]
    if len(hits) != 1:
        what = "is not" if not hits else "names several of"
        raise ValueError(
            f"focal_correct_reward={choice!r} {what} the reward functions {names}; give an "
            "index instead"
        )
    return hits[0]


def correct_reward_columns(choice, names: list[str]) -> tuple[int, ...]:
    """The columns of the verifiers: one (:func:`correct_reward_index`), or several given as
    ``"math,code"`` or a list (a multi-task dataset whose verifiers each score their own rows)."""
    if isinstance(choice, str) and "," in choice and choice not in names:
        choice = [c.strip() for c in choice.split(",")]
    if not isinstance(choice, (list, tuple)):
        return (correct_reward_index(choice, names),)
    if not choice:
        raise ValueError("focal_correct_reward must name at least one reward function, got []")
    columns = tuple(correct_reward_index(c, names) for c in choice)
    if len(set(columns)) != len(columns):
        raise ValueError(f"focal_correct_reward names a reward function twice: {choice!r}")
    return columns


def verifier_scores(rewards_per_func: torch.Tensor, columns) -> torch.Tensor:
    """(R,) the verifiers' score of each row of the (R, F) reward matrix: the largest of the
    ``columns`` that scored it (a verifier returns None, NaN here, for rows not its own); NaN
    when none did."""
    columns = (columns,) if isinstance(columns, int) else tuple(columns)
    rpf = rewards_per_func  # (R, F), in its own precision
    score = rpf[:, columns[0]]  # (R,)
    for c in columns[1:]:
        score = torch.fmax(score, rpf[:, c])  # NaN-aware: fmax(x, NaN) = x
    return score


def unscored_groups(rewards_per_func: torch.Tensor, columns, num_generations: int) -> int:
    """The number of groups that no verifier scored while another reward function did: X = 0
    and g = 1 for them, most likely a verifier left out of ``focal_correct_reward``."""
    columns = (columns,) if isinstance(columns, int) else tuple(columns)
    rpf = rewards_per_func  # (R, F)
    groups = rpf.shape[0] // num_generations
    verified = (~torch.isnan(verifier_scores(rpf, columns))).reshape(groups, -1).any(dim=1)  # (G,)
    others = [c for c in range(rpf.shape[1]) if c not in columns]
    if not others:
        return 0
    scored = (~torch.isnan(rpf[:, others])).reshape(groups, -1).any(dim=1)  # (G,)
    return int((~verified & scored).sum())


def gathered_group_weights(
    rewards_per_func: torch.Tensor,
    *,
    num_generations: int,
    settings: FocalSettings,
    column=0,
):
    """Per group of TRL's gathered (R, F) reward matrix: ``(g, X, N)``, each (G,), and the
    verifier's score of each row (R,).

    Rows ``k * num_generations .. (k+1) * num_generations - 1`` are group k; a row is correct
    when its verifier's reward (``column``, or the one of several columns that scored it,
    :func:`verifier_scores`) is >= ``settings.threshold``, compared in the matrix's own
    precision (float64 for the reward functions' own values); an unscored row (NaN) is wrong.
    """
    rpf = rewards_per_func  # (R, F)
    if rpf.shape[0] % num_generations:
        raise ValueError(
            f"{rpf.shape[0]} gathered rows are not whole groups of "
            f"num_generations={num_generations}"
        )
    score = verifier_scores(rpf, column)  # (R,)
    group = torch.arange(rpf.shape[0]) // num_generations  # (R,)
    g, X, N, _ = group_weights(score, group.tolist(), settings)  # (G,) each
    return g, X, N, score


def gathered_focal_weights(
    rewards_per_func: torch.Tensor,
    *,
    num_generations: int,
    settings: FocalSettings,
    column=0,
):
    """The per-row focal weight ``(g, X, N)``, each (R,), of TRL's gathered (R, F) reward matrix
    (:func:`gathered_group_weights`, each group's values on its ``num_generations`` rows)."""
    g, X, N, _ = gathered_group_weights(
        rewards_per_func, num_generations=num_generations, settings=settings, column=column
    )
    return tuple(v.repeat_interleave(num_generations) for v in (g, X, N))


def local_focal_weights(
    rewards_per_func: torch.Tensor,
    *,
    num_generations: int,
    process_index: int,
    local_size: int,
    settings: FocalSettings,
    column=0,
):
    """This process's slice (rows ``process_index * local_size .. + local_size``) of
    :func:`gathered_focal_weights`: the weight comes from the rewards of *all* processes."""
    g, X, N = gathered_focal_weights(
        rewards_per_func, num_generations=num_generations, settings=settings, column=column
    )
    sl = slice(process_index * local_size, (process_index + 1) * local_size)
    return g[sl], X[sl], N[sl]


def task_dataset(task, split: str, *, chat: bool = False):
    """A ``datasets.Dataset`` of a task split: ``prompt`` (the text our trainer and evaluations
    feed the model, or with ``chat`` the chat messages, :func:`fgrpo_llm.tasks.chat_messages`:
    boxed math's system prompt and problem, for TRL to apply the model's chat template),
    ``prompt_id`` (our stable id) and ``answer`` (as text, for
    :func:`fgrpo_llm.tasks.boxed_math.trl_reward`)."""
    from datasets import Dataset

    rows = {"prompt": [], "prompt_id": [], "answer": []}
    for p in task.problems(split):
        rows["prompt"].append(chat_messages(p) if chat else p.prompt)
        rows["prompt_id"].append(p.id)
        rows["answer"].append(str(p.answer))
    return Dataset.from_dict(rows)


#: The F-GRPO paper, for the model card TRL writes (and GRPO's, whose advantage F-GRPO weights).
F_GRPO_PAPER = {
    "title": "F-GRPO: Don't Let Your Policy Learn the Obvious and Forget the Rare",
    "id": "2602.06717",
    # docstyle-ignore
    "citation": textwrap.dedent("""\
        @article{fgrpo2026,
            title        = {{F-GRPO: Don't Let Your Policy Learn the Obvious and Forget the Rare}},
            year         = 2026,
            eprint       = {arXiv:2602.06717},
            url          = {https://arxiv.org/abs/2602.06717},
        }""")
    + "\n\n"
    + GRPOTrainer._paper["citation"],
}


def _recording(func, column: int, store: dict):
    """``func`` (a TRL reward function, sync or async) that also keeps its own values, as it
    returned them, in ``store[column]``: TRL keeps them in float32, the verdict needs them
    exact."""
    if _grpo_module.is_async_callable(func):

        @functools.wraps(func)
        async def recorded_async(*args, **kwargs):
            values = list(await func(*args, **kwargs))
            store[column] = values
            return values

        return recorded_async

    @functools.wraps(func)
    def recorded(*args, **kwargs):
        values = list(func(*args, **kwargs))
        store[column] = values
        return values

    return recorded


class FocalGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are multiplied by each group's focal weight g.

    Extra argument: ``task`` (optional): the task whose ``solution_form`` names the forms in
    ``groups.jsonl`` (else the stripped completion text is the form). Without ``args`` it builds
    ``FocalGRPOConfig("<model name>-F-GRPO")``, as TRL's trainer builds its default config.
    The model card TRL writes names F-GRPO and its paper (arXiv 2602.06717).
    """

    _tag_names = ["trl", "grpo", "f-grpo"]
    _name = "F-GRPO"
    _paper = F_GRPO_PAPER

    def __init__(self, model, reward_funcs=None, args=None, *more, task=None, **kwargs):
        check_trl_version()
        if args is None:  # as GRPOTrainer does, with this trainer's config and name
            name = (
                model if isinstance(model, str) else _grpo_module.get_config_model_id(model.config)
            )
            args = FocalGRPOConfig(f"{str(name).split('/')[-1]}-F-GRPO")
        if not isinstance(args, FocalGRPOConfig):
            raise TypeError(
                f"FocalGRPOTrainer needs args=FocalGRPOConfig(...), got {type(args).__name__}"
            )
        super().__init__(model, reward_funcs, args, *more, **kwargs)
        self.focal = self.args.focal_settings()
        if self.focal.weight_is_one:
            warnings.warn(
                f"FocalGRPOTrainer with the weighting {self.focal.w}: g = 1 for every group, so "
                "this run is plain GRPO; set focal_gamma > 0 (e.g. 1.0) for F-GRPO",
                UserWarning,
                stacklevel=2,
            )
        self.focal_columns = correct_reward_columns(
            self.args.focal_correct_reward, list(self.reward_func_names)
        )
        # the verifiers' own values (TRL keeps float32 copies): X is counted on them
        self._raw_rewards: dict[int, list] = {}
        self._exact_columns = []
        for c in self.focal_columns:
            if not isinstance(self.reward_funcs[c], torch.nn.Module):
                self.reward_funcs[c] = _recording(self.reward_funcs[c], c, self._raw_rewards)
                self._exact_columns.append(c)
        self.reward_check = RewardCheck(
            self.focal,
            where="FocalGRPOTrainer",
            advice=(
                "Let focal_correct_reward name the reward function that returns the verifier's "
                "verdict, or set focal_reward_wrong / focal_reward_correct (and "
                "focal_correct_threshold) to that verifier's two values"
            ),
            strict_setting="focal_strict_rewards",
        )
        self._warned_unscored = False
        self.task = task
        self._problems = {}
        if task is not None:
            for split in task.splits:
                self._problems.update({p.id: p for p in task.problems(split)})
        self._focal_captured = None
        self.recorder = None
        run_dir = self.args.focal_records_dir()
        if run_dir:
            _warn_if_pushed(run_dir, self.args.output_dir)
        if run_dir and self.accelerator.is_main_process:
            self.recorder = RunRecorder(
                run_dir,
                engine="trl",
                algo=self.args.focal_algo,
                group_size=int(self.num_generations),
                gamma=self.focal.gamma,
                lr_scale=float(self.args.focal_lr_scale),
                weighting=str(self.focal.w),
                sampling=trl_sampling(self.args, warn=False).policy(),
                environment={
                    **environment(self.accelerator.device),
                    "processes": int(self.accelerator.num_processes),
                    "trl": _trl_version(),
                },
            )

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        """Trainer.train; resuming from a checkpoint first drops the run records of the steps
        after it (they are trained, and recorded, again), so no step is counted twice. A run that
        does not resume starts its records afresh (an earlier run's in the same directory
        would otherwise count as this one's; so would what this trainer logged before
        ``train``, e.g. a ``trainer.evaluate()``)."""
        if self.recorder is not None:
            step = (
                _checkpoint_step(resume_from_checkpoint, self.args.output_dir)
                if resume_from_checkpoint
                else -1  # every line, step 0 (an evaluation on start) included
            )
            if step is not None:
                self.recorder.truncate(step)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # TRL private hook 1: the gathered rewards (and this process's completions) of one batch
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._raw_rewards.clear()
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        exact = self._exact_rewards(rewards_per_func, len(prompts))
        self._focal_captured = (exact, inputs, completions)
        return rewards_per_func

    def _exact_rewards(self, rewards_per_func: torch.Tensor, B: int) -> torch.Tensor:
        """TRL's gathered (R, F) rewards in float64, the verifiers' columns holding their own
        values (None as NaN) gathered from every process as TRL gathers its float32 copy."""
        exact = rewards_per_func.detach().to(torch.float64)  # (R, F)
        if not self._exact_columns:
            return exact
        start = self.accelerator.process_index * B
        local = exact[start : start + B].clone()  # (B, F) this process's rows
        for c in self._exact_columns:
            values = self._raw_rewards.get(c)
            if values is not None and len(values) == B:
                local[:, c] = torch.tensor(
                    [float("nan") if v is None else float(v) for v in values],
                    dtype=torch.float64,
                    device=local.device,
                )
        gathered = _grpo_module.gather(local)  # (R, F), TRL's own gather
        cols = list(self._exact_columns)
        exact[:, cols] = gathered[:, cols].to(exact.device)
        return exact

    # TRL private hook 2: TRL's (sliced) advantages times the matching slice of g
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self._focal_captured is None:
            raise RuntimeError(
                f"FocalGRPOTrainer: TRL did not call _calculate_rewards; this TRL version is not "
                f"supported (tested: trl {TESTED_TRL})"
            )
        rewards_per_func, local_inputs, completions = self._focal_captured
        self._focal_captured = None
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        g_groups, X, N, score = gathered_group_weights(
            rewards_per_func,
            num_generations=num_generations,
            settings=self.focal,
            column=self.focal_columns,
        )  # (G,) each, every process's groups; score (R,)
        g_all = g_groups.repeat_interleave(num_generations)  # (R,) every process's rows
        self._warn_unscored(rewards_per_func, num_generations)
        adv = output["advantages"]
        engine = self._engine_advantages(len(g_all))  # (R,) TRL's, before the weight
        nonzero = bool((engine if engine is not None else adv).ne(0).any())
        self.reward_check(score, g_groups, nonzero)
        start = self.accelerator.process_index * len(local_inputs)
        g = g_all[start : start + len(local_inputs)]  # (B,) the rows TRL kept for this process
        output["advantages"] = adv * g.to(adv.device, adv.dtype).reshape(
            adv.shape[:1] + (1,) * (adv.dim() - 1)
        )
        self._log_weighted_advantages(g_all)
        for key, value in focal_metrics(g_groups, X, N).items():
            self._metrics[mode][key].append(value)
        if mode == "train":
            self._record_groups(rewards_per_func, local_inputs, completions, num_generations)
        return output

    def _engine_advantages(self, R: int) -> torch.Tensor | None:
        """(R,) the advantages TRL computed for every process's rows of this batch (the last R
        it logged for the completions table), before the weight; None if it logged fewer."""
        logged = getattr(self, "_logs", {}).get("advantages")
        if logged is None or len(logged) < R:
            return None
        return torch.tensor(list(logged)[-R:], dtype=torch.float64)

    def _warn_unscored(self, rewards_per_func, num_generations: int) -> None:
        """Once per trainer: groups that no verifier scored while another reward function did."""
        if self._warned_unscored:
            return
        missed = unscored_groups(rewards_per_func, self.focal_columns, num_generations)
        if missed:
            self._warned_unscored = True
            names = [self.reward_func_names[c] for c in self.focal_columns]
            warnings.warn(
                f"FocalGRPOTrainer: {missed} group(s) of this batch have no score from the "
                f"verifier(s) {names} (focal_correct_reward) while another reward function scored "
                "them, so they count X = 0 and g = 1; with one verifier per task, name them all, "
                "e.g. focal_correct_reward='math,code'",
                RuntimeWarning,
                stacklevel=2,
            )

    def _log_weighted_advantages(self, g_all: torch.Tensor) -> None:
        """TRL logged this batch's advantages (every process's rows, in order, the completions
        table of its trackers) before they were weighted: weight them there too."""
        logged = getattr(self, "_logs", {}).get("advantages")
        n = min(len(logged), len(g_all)) if logged is not None else 0
        if n == 0:
            return
        tail = [a * w for a, w in zip(list(logged)[-n:], g_all[-n:].tolist(), strict=True)]
        for _ in range(n):
            logged.pop()
        logged.extend(tail)

    def _record_groups(self, rewards_per_func, local_inputs, completions, num_generations):
        """One ``groups.jsonl`` record per group: every process sends the main process its rows'
        prompt ids and the forms of its correct completions only (not their texts)."""
        col = self.args.focal_prompt_id_column
        ids = [str(x[col]) if col in x else None for x in local_inputs]
        if any(i is None for i in ids):
            ids = [
                i if i is not None else text_prompt_id(x.get("prompt"))
                for i, x in zip(ids, local_inputs, strict=True)
            ]
        start = self.accelerator.process_index * len(local_inputs)
        score = verifier_scores(
            rewards_per_func[start : start + len(local_inputs)], self.focal_columns
        )
        correct = correct_mask(score, self.focal).tolist()  # (B,), NaN is wrong
        texts = [
            c if isinstance(c, str) else (c[-1].get("content", "") if c else "")
            for c in completions
        ]

        forms = row_forms(ids, texts, correct, task=self.task, problems=self._problems)  # (B,)
        rows = gather_object(list(zip(ids, forms, strict=True)))  # (R,) (prompt id, form)
        if self.recorder is None:
            return
        self.recorder.log_forms(
            step=int(self.state.global_step) + 1,
            prompt_ids=[r[0] for r in rows],
            forms=[r[1] for r in rows],
            group_ids=[i // num_generations for i in range(len(rows))],
        )

    def log(self, logs: dict, start_time: float | None = None) -> None:
        super().log(logs, start_time)
        if self.recorder is not None and "loss" in logs:
            keep = {
                k: v
                for k, v in logs.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            self.recorder.log_metrics(int(self.state.global_step), keep)


def _warn_if_pushed(run_dir, output_dir) -> None:
    """A warning when the run records would be uploaded by ``push_to_hub``: inside
    ``output_dir`` under a name that transformers' ignore patterns (``_*``, ``checkpoint-*``)
    do not cover."""
    try:
        rel = Path(run_dir).resolve().relative_to(Path(output_dir).resolve())
    except ValueError:
        return  # outside output_dir
    first = rel.parts[0] if rel.parts else ""
    if not first.startswith("_") and not first.startswith("checkpoint-"):
        warnings.warn(
            f"focal_run_dir={str(run_dir)!r} lies inside output_dir={str(output_dir)!r}, so "
            "push_to_hub would upload the run records (run.json, groups.jsonl, metrics.jsonl) "
            f"with the model; the default, <output_dir>/{RUN_RECORDS_DIR}, is left out",
            UserWarning,
            stacklevel=3,
        )


def _trl_version() -> str:
    import trl

    return trl.__version__


def _checkpoint_step(resume_from_checkpoint, output_dir) -> int | None:
    """The global step of the checkpoint a run resumes from (``True``: the last one in
    ``output_dir``), from its ``trainer_state.json``; None when there is none (transformers
    then reports the missing checkpoint itself)."""
    import json
    from pathlib import Path

    from transformers.trainer_utils import get_last_checkpoint

    path = resume_from_checkpoint
    if path is True:
        path = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
    if not path:
        return None
    state = Path(path) / "trainer_state.json"
    try:
        return int(json.loads(state.read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def task_reward_func(task):
    """A TRL reward function scoring completions with ``task.reward`` (the dataset needs
    ``prompt_id``)."""
    problems = {}
    for split in task.splits:
        problems.update({p.id: p for p in task.problems(split)})

    def reward(completions, prompt_id, **kwargs) -> list[float]:
        out = []
        for c, pid in zip(completions, prompt_id, strict=True):
            text = c if isinstance(c, str) else (c[-1].get("content", "") if c else "")
            out.append(float(task.reward(problems[str(pid)], text)))
        return out

    reward.__name__ = f"{task.name}_reward"
    return reward
