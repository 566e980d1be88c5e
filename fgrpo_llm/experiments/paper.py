"""The paper's published numbers, for side-by-side tables and plots (never a result of ours).

``paper_results.json`` (shipped with the package) holds the numbers published in "F-GRPO: Don't
Let Your Policy Learn the Obvious and Forget the Rare" (arXiv 2602.06717v2, CC BY 4.0): the
group-size sweep with Delta NLL_rare (Table 2), the main table at N = 8 (Table 1), the gamma
sensitivity (Table 6) and the Maze table (Table 4). Reports show them *beside* our results.

    paper = load_paper_results()
    paper["table2_group_size_sweep_qwen2.5_7b"]["rows"]["GRPO N=8"]["delta_nll_rare"]   # 0.68
"""

from __future__ import annotations

from pathlib import Path

from fgrpo_common.files import read_json

__all__ = ["PAPER_RESULTS", "load_paper_results"]

#: The shipped copy of the paper's numbers.
PAPER_RESULTS = Path(__file__).with_name("paper_results.json")


def load_paper_results(path=None) -> dict:
    """The paper's numbers from ``path`` (default: the shipped copy); FileNotFoundError / ValueError
    naming the file when it is missing or not a JSON object."""
    path = Path(path) if path is not None else PAPER_RESULTS
    if not path.is_file():
        raise FileNotFoundError(f"paper results file not found: {path}")
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data
