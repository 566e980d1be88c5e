"""Our tasks as verl data, and the map back from verl's dumped prompts to our prompt ids.

verl reads parquet rows ``{"data_source", "prompt": [chat messages], "reward_model":
{"ground_truth"}, "extra_info": {...}}``; :func:`verl_rows` makes them from a task split
(boxed math: the paper's system prompt and the problem; other tasks: the prompt as one user
message), with our stable problem id in ``extra_info.prompt_id``. verl's rollout dump holds the
prompt as decoded text (``tokenizer.decode(ids, skip_special_tokens=True)``);
:func:`prompt_index` rebuilds exactly that text for each problem, so the records of a verl run
carry the ids of the rare-correct set (``fgrpo_llm.integrations.records.records_from_verl_dump``).
"""

from __future__ import annotations

from fgrpo_llm.tasks import chat_messages

__all__ = ["verl_rows", "write_parquet", "prompt_index"]


def verl_rows(task, split: str, *, data_source: str | None = None) -> list[dict]:
    """One verl row per problem of ``task``'s ``split``."""
    return [
        {
            "data_source": data_source or task.name,
            "prompt": chat_messages(p),
            "reward_model": {"style": "rule", "ground_truth": str(p.answer)},
            "extra_info": {"prompt_id": p.id, "split": split, "index": i},
        }
        for i, p in enumerate(task.problems(split))
    ]


def write_parquet(rows: list[dict], path) -> None:
    """Write verl rows to a parquet file (needs pandas + pyarrow, which verl installs)."""
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path)


def prompt_index(task, split: str, tokenizer, **template_kwargs) -> dict[str, str]:
    """decoded prompt text (as in verl's rollout dump) -> our problem id. ``template_kwargs``
    go to ``apply_chat_template`` as verl passes them: the run's
    ``data.apply_chat_template_kwargs`` (e.g. ``enable_thinking=False``) and ``tools``."""
    out = {}
    for p in task.problems(split):
        ids = tokenizer.apply_chat_template(
            chat_messages(p), add_generation_prompt=True, tokenize=True, **template_kwargs
        )
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        out[tokenizer.decode(ids, skip_special_tokens=True)] = p.id
    return out
