"""The groups of a training step: B prompts x N completions, scored by the task's verifier.

A :class:`Round` is one sampling round (its rollouts, rewards and verdicts); :class:`Groups` is
what a step trains on: all groups of its first round, or under DAPO's dynamic sampling the first
B active ones (0 < X < N) across rounds, with their rows, rewards and verdicts kept together.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fgrpo_llm.rollout import RolloutBatch, SamplingParams, concat_rollouts, sample_completions
from fgrpo_llm.tasks import solution_form
from fgrpo_llm.tracking import group_record

__all__ = ["Round", "Groups", "sample_round", "first_active", "rows_of"]


@dataclass
class Round:
    """One sampling round of b prompts: their rollouts (b*N rows, grouped), rewards and verdicts."""

    idx: list[int]  # (b,) problem indices
    batch: RolloutBatch  # b*N rows, prompt k -> rows k*N .. k*N+N-1
    rewards: torch.Tensor  # (b, N) the task's rewards
    correct: torch.Tensor  # (b, N) bool, the task's verdicts (is_correct)
    forms: list  # (b*N,) solution form of each correct completion, None otherwise

    @property
    def X(self) -> torch.Tensor:
        """(b,) number of correct completions per group."""
        return self.correct.sum(dim=1)

    @property
    def active(self) -> torch.Tensor:
        """(b,) groups with 0 < X < N, the groups a binary reward gives a nonzero advantage."""
        return (self.X > 0) & (self.X < self.correct.shape[1])


def sample_round(
    model,
    tok,
    task,
    problems,
    idx,
    N: int,
    sampling: SamplingParams,
    generator,
    *,
    sampler=sample_completions,
) -> Round:
    """N completions for each problem in ``idx`` under ``sampling``, scored by the task.
    ``sampler`` draws them (``fgrpo_llm.rollout.sample_completions``; the trainer passes its own
    reference, which the golden update test replaces)."""
    batch = sampler(
        model,
        tok,
        [problems[i].prompt for i in idx],
        num_samples=N,
        sampling=sampling,
        generator=generator,
    )
    row_problem = [problems[i] for i in idx for _ in range(N)]
    pairs = list(zip(row_problem, batch.completions, strict=True))
    correct = [bool(task.is_correct(p, c)) for p, c in pairs]
    rewards = torch.tensor([float(task.reward(p, c)) for p, c in pairs], dtype=torch.float32)
    forms = [
        solution_form(task, p, c) if ok else None for (p, c), ok in zip(pairs, correct, strict=True)
    ]
    return Round(
        idx, batch, rewards.view(len(idx), N), torch.tensor(correct).view(len(idx), N), forms
    )


def first_active(rounds: list[Round], B: int) -> list[torch.Tensor]:
    """Dynamic sampling: keep the first B active groups (0 < X < N) across rounds, in sampling
    order."""
    keep, kept = [], 0
    for r in rounds:
        k = r.active & (torch.cumsum(r.active.long(), 0) + kept <= B)
        keep.append(k)
        kept += int(k.sum())
    return keep


def rows_of(groups: torch.Tensor, N: int) -> torch.Tensor:
    """Row indices of the given groups (rows of group b are b*N .. b*N+N-1)."""
    return (groups[:, None] * N + torch.arange(N)).flatten()


@dataclass
class Groups:
    """The groups of one step: every sampling round, and the B_k of them the step trains on (all,
    or under dynamic sampling the first B active ones), in sampling order."""

    rounds: list[Round]
    keep: list[torch.Tensor]  # per round (b,) bool: the group is trained on
    rewards: torch.Tensor  # (B_k, N) rewards of the trained groups
    correct: torch.Tensor  # (B_k, N) bool, the verifier's verdicts of the trained groups

    @classmethod
    def of(cls, rounds: list[Round], keep: list[torch.Tensor], N: int) -> Groups:
        pairs = list(zip(rounds, keep, strict=True))
        rewards = torch.cat([r.rewards[k] for r, k in pairs]).view(-1, N)
        correct = torch.cat([r.correct[k] for r, k in pairs]).view(-1, N)
        return cls(rounds, keep, rewards, correct)

    @property
    def Bk(self) -> int:
        return self.rewards.shape[0]

    def batch(self, N: int, pad_id: int) -> RolloutBatch:
        """The B_k * N rows of the trained groups, group by group."""
        parts = [
            r.batch.select(rows_of(k.nonzero().flatten(), N))
            for r, k in zip(self.rounds, self.keep, strict=True)
            if k.any()
        ]
        return concat_rollouts(parts, pad_id=pad_id)

    def records(self, step: int, problems, N: int, g: torch.Tensor, *, weighting: str = "focal"):
        """One groups.jsonl record per sampled group; a trained one carries the weight g it was
        trained with (g: (B_k,), in the order of the trained groups), under ``<weighting>_weight``
        (``focal_weight``, ``maxrl_weight``: the rule's name)."""
        weights = g.tolist()
        t = 0  # trained groups so far: the index into g
        for n_round, (r, k) in enumerate(zip(self.rounds, self.keep, strict=True)):
            for b, i in enumerate(r.idx):
                trained = bool(k[b])
                extra = {f"{weighting}_weight": weights[t]} if trained else {}
                t += trained
                forms = [r.forms[b * N + j] for j in range(N) if r.correct[b, j]]
                yield group_record(
                    step=step,
                    prompt_id=problems[i].id,
                    N=N,
                    num_correct=len(forms),
                    forms=forms,
                    trained=trained,
                    round=n_round,
                    **extra,
                )
