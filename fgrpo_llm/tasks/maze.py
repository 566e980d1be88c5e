"""The Maze single-solution task (paper Section 5.2, Appendix K).

Each prompt is a *perfect* maze (its passages form a spanning tree of the cell graph), so
exactly one simple path joins the start and the goal and exactly one completion is correct:
any pass@k loss on this task cannot come from within-prompt diversity.

Layout. A maze of ``c x c`` cells is drawn on a ``G x G`` grid with ``G = 2c + 1`` (the paper's
17x17 grid is 8x8 cells): cell ``(r, q)`` sits at grid square ``(2r + 1, 2q + 1)`` and the
square between two adjacent cells is open iff a passage joins them. The prompt is the grid read
row by row, one symbol per square, space separated, without the outer ring of walls (it is the
same in every maze and carries no information, so a 17x17 maze is a 15x15 = 225-symbol prompt)::

    # wall   . open   S start   G goal   then ">" (the answer starts here)

The completion is a sequence of cell moves ``U D L R`` (one move goes from a cell to the
adjacent cell) followed by the termination token ``END``; the verifier accepts exactly the
unique solution path followed by ``END`` and nothing else.

    task = MazeTask(grid_size=9, num_train=1000, num_test=64, seed=0)
    problem = task.problems("test")[0]
    task.reward(problem, problem.answer + " END")   # 1.0
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from fgrpo_llm.tasks.base import Problem, content_id

WALL, OPEN, START, GOAL = "#", ".", "S", "G"
ANSWER_MARK = ">"  # last prompt token: the answer starts after it
END = "END"  # termination token of a completion
MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
GRID_SYMBOLS = (WALL, OPEN, START, GOAL)
#: Every symbol a maze prompt or completion uses (for a word-level tokenizer).
VOCAB = (*GRID_SYMBOLS, ANSWER_MARK, *MOVES, END)


@dataclass(frozen=True)
class Maze:
    """A maze on a ``G x G`` grid (``G = 2 * cells + 1``).

    ``open_grid[i, j]`` is True on open squares (cells and the passages between them);
    ``start`` and ``goal`` are cell coordinates ``(r, q)`` with ``0 <= r, q < cells``.
    """

    open_grid: np.ndarray = field(repr=False)  # (G, G) bool
    start: tuple[int, int]
    goal: tuple[int, int]

    @property
    def cells(self) -> int:
        return (self.open_grid.shape[0] - 1) // 2

    def neighbours(self, cell: tuple[int, int]) -> list[tuple[str, tuple[int, int]]]:
        """The (move, cell) pairs reachable from ``cell`` in one move through an open passage."""
        r, q = cell
        out = []
        for move, (dr, dq) in MOVES.items():
            if self.open_grid[2 * r + 1 + dr, 2 * q + 1 + dq]:
                out.append((move, (r + dr, q + dq)))
        return out


def _check_grid_size(grid_size: int) -> int:
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)):
        raise ValueError(f"grid_size must be an odd integer >= 5, got {grid_size!r}")
    if grid_size < 5 or grid_size % 2 == 0:
        raise ValueError(
            "grid_size must be an odd integer >= 5 (2 * cells + 1, at least 2x2 cells), got "
            f"{grid_size}"
        )
    return int(grid_size)


def generate_maze(grid_size: int, rng: np.random.Generator) -> Maze:
    """A random-DFS (recursive backtracker) perfect maze with a random start and a distinct random
    goal.

    Random DFS visits every cell once and opens one passage per newly visited cell, so the
    passages form a spanning tree: ``cells**2 - 1`` edges, connected, hence one path per pair.
    """
    G = _check_grid_size(grid_size)
    c = (G - 1) // 2
    open_grid = np.zeros((G, G), dtype=bool)
    visited = np.zeros((c, c), dtype=bool)
    first = (int(rng.integers(c)), int(rng.integers(c)))
    visited[first] = True
    open_grid[2 * first[0] + 1, 2 * first[1] + 1] = True
    stack = [first]
    while stack:
        r, q = stack[-1]
        fresh = [
            (dr, dq)
            for dr, dq in MOVES.values()
            if 0 <= r + dr < c and 0 <= q + dq < c and not visited[r + dr, q + dq]
        ]
        if not fresh:
            stack.pop()
            continue
        dr, dq = fresh[int(rng.integers(len(fresh)))]
        nxt = (r + dr, q + dq)
        visited[nxt] = True
        open_grid[2 * r + 1 + dr, 2 * q + 1 + dq] = True  # the passage
        open_grid[2 * nxt[0] + 1, 2 * nxt[1] + 1] = True  # the cell
        stack.append(nxt)
    start_flat, goal_flat = rng.choice(c * c, size=2, replace=False)
    start = (int(start_flat) // c, int(start_flat) % c)
    goal = (int(goal_flat) // c, int(goal_flat) % c)
    return Maze(open_grid=open_grid, start=start, goal=goal)


def solve(maze: Maze) -> list[str]:
    """The moves of the path from start to goal found by breadth-first search (unique in a perfect
    maze)."""
    parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {maze.start: None}
    queue = deque([maze.start])
    while queue:
        cell = queue.popleft()
        if cell == maze.goal:
            break
        for move, nxt in maze.neighbours(cell):
            if nxt not in parent:
                parent[nxt] = (cell, move)
                queue.append(nxt)
    if maze.goal not in parent:
        raise ValueError("the goal is not reachable from the start")
    moves: list[str] = []
    cell = maze.goal
    while parent[cell] is not None:
        cell, move = parent[cell]
        moves.append(move)
    return moves[::-1]


def encode_prompt(maze: Maze) -> str:
    """The prompt: the grid inside the outer wall ring, row by row, one symbol per square, then
    ">"."""
    symbols = np.where(maze.open_grid, OPEN, WALL).astype(object)
    symbols[2 * maze.start[0] + 1, 2 * maze.start[1] + 1] = START
    symbols[2 * maze.goal[0] + 1, 2 * maze.goal[1] + 1] = GOAL
    return " ".join(symbols[1:-1, 1:-1].ravel().tolist()) + " " + ANSWER_MARK


def decode_prompt(prompt: str) -> Maze:
    """Inverse of :func:`encode_prompt`; ValueError on a malformed prompt."""
    tokens = prompt.split()
    if not tokens or tokens[-1] != ANSWER_MARK:
        raise ValueError(f"a maze prompt ends with {ANSWER_MARK!r}, got {prompt[-20:]!r}")
    grid = tokens[:-1]
    side = int(round(len(grid) ** 0.5))  # G - 2: the outer ring is not in the prompt
    if side * side != len(grid) or any(t not in GRID_SYMBOLS for t in grid):
        raise ValueError(
            f"a maze prompt holds a square grid of {GRID_SYMBOLS} symbols, got {len(grid)} tokens"
        )
    G = _check_grid_size(side + 2)
    arr = np.full((G, G), WALL, dtype=object)
    arr[1:-1, 1:-1] = np.array(grid, dtype=object).reshape(side, side)
    if (arr == START).sum() != 1 or (arr == GOAL).sum() != 1:
        raise ValueError(f"a maze prompt holds exactly one {START!r} and one {GOAL!r}")
    (si, sj), (gi, gj) = (np.argwhere(arr == START)[0], np.argwhere(arr == GOAL)[0])
    return Maze(
        open_grid=arr != WALL, start=(int(si) // 2, int(sj) // 2), goal=(int(gi) // 2, int(gj) // 2)
    )


def walk(maze: Maze, completion: str) -> str:
    """Replay a completion on the maze and name its outcome (for diagnostics and the tests).

    ``"solved"``: the unique simple path to the goal, then ``END``, then nothing;
    otherwise the first failure: ``"invalid_token"``, ``"wall"``, ``"revisit"`` (a step back
    onto the path walked so far), ``"no_end"`` (stopped before ``END``), ``"early_end"``
    (``END`` before the goal), ``"overshoot"`` (moved on from the goal), ``"trailing"``
    (tokens after ``END``).
    """
    cell, seen = maze.start, {maze.start}
    tokens = completion.split()
    for i, token in enumerate(tokens):
        if token == END:
            if cell != maze.goal:
                return "early_end"
            return "solved" if i == len(tokens) - 1 else "trailing"
        if token not in MOVES:
            return "invalid_token"
        if cell == maze.goal:
            return "overshoot"
        reachable = dict(maze.neighbours(cell))
        if token not in reachable:
            return "wall"
        cell = reachable[token]
        if cell in seen:
            return "revisit"
        seen.add(cell)
    return "no_end"


class MazeTask:
    """Perfect mazes with one correct completion each; ``train`` and ``test`` splits never overlap.

    Args:
        grid_size: odd side of the grid, ``2 * cells + 1`` (paper: 17).
        num_train: number of distinct training mazes (SFT targets and RL prompts).
        num_test: number of distinct held-out mazes (paper: 256).
        seed: base seed; the splits use independent streams derived from it.
    """

    name = "maze"
    splits = ("train", "test")

    def __init__(
        self, *, grid_size: int = 17, num_train: int = 20000, num_test: int = 256, seed: int = 0
    ):
        self.grid_size = _check_grid_size(grid_size)
        for arg, value in (("num_train", num_train), ("num_test", num_test)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{arg} must be a positive integer, got {value!r}")
        self.num_train, self.num_test, self.seed = int(num_train), int(num_test), int(seed)
        self._cache: dict[str, list[Problem]] = {}

    @property
    def max_new_tokens(self) -> int:
        """The completion limit when none is given: a simple path has at most cells^2 - 1 moves,
        then END, then EOS (cells = (grid_size - 1) / 2)."""
        return ((self.grid_size - 1) // 2) ** 2 + 1

    def problems(self, split: str) -> list[Problem]:
        """The split's problems; generated once, deterministic in ``seed``."""
        if split not in self.splits:
            raise ValueError(f"split must be one of {self.splits}, got {split!r}")
        if split not in self._cache:
            test = self._generate("test", self.num_test, exclude=set())
            self._cache["test"] = test
            self._cache["train"] = self._generate(
                "train", self.num_train, exclude={p.prompt for p in test}
            )
        return self._cache[split]

    def _generate(self, split: str, count: int, exclude: set[str]) -> list[Problem]:
        rng = np.random.default_rng([self.seed, 0 if split == "test" else 1])
        seen, out = set(exclude), []
        attempts, max_attempts = 0, 20 * count + 1000
        while len(out) < count:
            attempts += 1
            if attempts > max_attempts:
                raise ValueError(
                    f"could not draw {count} distinct {split} mazes of grid_size {self.grid_size}; "
                    f"lower num_{split}"
                )
            maze = generate_maze(self.grid_size, rng)
            prompt = encode_prompt(maze)
            if prompt in seen:
                continue
            seen.add(prompt)
            moves = solve(maze)
            out.append(
                Problem(
                    id=content_id("maze", prompt, " ".join(moves)),
                    prompt=prompt,
                    answer=" ".join(moves),
                    split=split,
                    meta={"grid_size": self.grid_size, "path_length": len(moves)},
                )
            )
        return out

    @staticmethod
    def target(problem: Problem) -> str:
        """The one correct completion (the SFT target): the solution moves, then ``END``."""
        return f"{problem.answer} {END}"

    def is_correct(self, problem: Problem, completion: str) -> bool:
        """True iff the completion's tokens are exactly the unique solution path followed by
        ``END``."""
        return isinstance(completion, str) and completion.split() == self.target(problem).split()

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 if correct, else 0.0."""
        return 1.0 if self.is_correct(problem, completion) else 0.0

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        """The path itself (there is one correct form per maze), or None when wrong."""
        return problem.answer if self.is_correct(problem, completion) else None
