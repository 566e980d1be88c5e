"""Writes notebooks/01_tail_miss.ipynb and notebooks/02_derivations.ipynb (no outputs).

    python notebooks/build_01_02_theory.py
"""  # fmt: skip

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
KERNEL = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}

nb1 = new_notebook(
    metadata=KERNEL,
    cells=[
        new_markdown_cell(
            "# How likely is a group to update on mixed rewards yet miss the rare correct "
            "solutions?\n\nLemma 3.1 of F-GRPO: a group of $N$ rollouts is a *tail miss* when it "
            "is active (mixed rewards) but no rollout lands in the rare-correct set $E$ of mass "
            "$\\tau = \\rho\\,\\mu$:\n\n$$P(\\mathcal{B}_{E,N}) = (1-\\tau)^N - "
            "(\\mu-\\tau)^N - (1-\\mu)^N.$$\n\nThis notebook reproduces paper Figs. 1(a), 3, 4 "
            "and 5 from `fgrpo_theory` (set `FGRPO_NOTEBOOK_FAST=1` for small grids)."
        ),
        new_code_cell(
            "import os\n\nimport matplotlib.pyplot as plt\nimport numpy as np\n\nfrom "
            "fgrpo_theory.plots import FIG1A, FIG3, FIG5, plot_focal_magnitudes, "
            "plot_large_group, plot_tail_miss_curves\nfrom fgrpo_theory.tail_miss import "
            "p_tail_miss, peak_group_size, stationary_group_size\n\nFAST = "
            "os.environ.get('FGRPO_NOTEBOOK_FAST') == '1'\nN_MAX_1A, N_MAX_3, LOG2_N_MAX_5 = (32, "
            "64, 12) if FAST else (FIG1A['n_max'], FIG3['n_max'], FIG5['log2_n_max'])"
        ),
        new_markdown_cell(
            "## Fig. 1(a): $\\mu = 0.3$, three rare fractions\n\nThe tail-miss probability is 0 "
            "at $N=1$, peaks at a moderate $N$ (stars) and only then decays."
        ),
        new_code_cell(
            "fig, ax = plt.subplots(figsize=(5, 3.4))\nplot_tail_miss_curves(ax, mu=FIG1A['mu'], "
            "rhos=FIG1A['rhos'], N=range(1, N_MAX_1A + 1), show_active=True)\nplt.show()"
        ),
        new_markdown_cell(
            "## Fig. 3: peaks across $\\mu$ and $\\rho$\n\n"
            "Smaller $\\rho$ moves the peak to larger $N$ and makes it higher."
        ),
        new_code_cell(
            "fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))\n"
            "for ax, mu in zip(axes, FIG3['mus']):\n"
            "    plot_tail_miss_curves(ax, mu=mu, rhos=FIG3['rhos'], N=range(1, N_MAX_3 + 1))\n"
            "    ax.set_xscale('log', base=2)\n"
            "fig.tight_layout()\n"
            "plt.show()"
        ),
        new_code_cell(
            "print(f\"{'mu':>5} {'rho':>5} {'N*':>4} {'P(B) at N*':>10} {'N_c':>7}\")\n"
            "for mu in FIG3['mus']:\n    for rho in FIG3['rhos']:\n        n_star, p_star = "
            "peak_group_size(mu, rho * mu)\n        print(f'{mu:5g} {rho:5g} {n_star:4d} "
            "{p_star:10.4f} {stationary_group_size(mu, rho * mu):7.2f}')"
        ),
        new_markdown_cell(
            "## Fig. 4: focal-scaled advantage magnitudes\n\n$g=(1-\\hat\\mu)^\\gamma$ shrinks "
            "the update most where $\\mu$ is high, for correct and incorrect rollouts alike "
            "($\\gamma=0$ is GRPO)."
        ),
        new_code_cell(
            "fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))\n"
            "plot_focal_magnitudes(axes[0], which='pos')\n"
            "plot_focal_magnitudes(axes[1], which='neg')\n"
            "for ax in axes:\n"
            "    ax.set_ylim(0, 3)\n"
            "fig.tight_layout()\n"
            "plt.show()"
        ),
        new_markdown_cell(
            "## Fig. 5: very large groups at a tiny $\\tau$\n\nWith $\\mu=0.64$ and "
            "$\\tau=6.3\\times10^{-5}$ the tail-miss probability climbs to a plateau near 1 "
            "(above 0.96 from $N = 2^3$ to $2^9$) and falls as $N\\tau$ approaches one: 0.94 at "
            "$N = 2^{10}$, 0.60 at $N = 2^{13}$ ($N\\tau \\approx 0.5$), 0.13 at $N = 2^{15}$ "
            "and about 0 at $N = 2^{17}$."
        ),
        new_code_cell(
            "fig, ax = plt.subplots(figsize=(5, 3.4))\nplot_large_group(ax, "
            "log2_n_max=LOG2_N_MAX_5)\nplt.show()\nN = 2.0 ** np.arange(LOG2_N_MAX_5 + 1)\n"
            "print(dict(zip(N.astype(int).tolist(), np.round(p_tail_miss(FIG5['mu'], FIG5['tau'], "
            "N), 4).tolist())))"
        ),
    ],
)

nb2 = new_notebook(
    metadata=KERNEL,
    cells=[
        new_markdown_cell(
            "# Where does Lemma 3.1 come from, and what does it imply?\n\nEvery rollout lands in "
            "exactly one of three regions: the rare-correct set $E$ ($\\tau$), the rest of the "
            "correct set ($\\mu-\\tau$) and the incorrect set ($1-\\mu$). "
            "`fgrpo_theory.derivations` derives the tail-miss probability from that three-region "
            "multinomial with sympy, step by step."
        ),
        new_code_cell(
            "import os\n\n"
            "import sympy as sp\n\n"
            "from fgrpo_theory import derivations as d\n\n"
            "FAST = os.environ.get('FGRPO_NOTEBOOK_FAST') == '1'\n"
            "sp.init_printing()"
        ),
        new_markdown_cell(
            "## The derivation\n\n$\\{\\#E = 0\\}$ has probability given by a binomial sum over "
            "the other two regions; removing the two corners where the group is all incorrect or "
            "all common-correct leaves exactly the active groups that miss $E$."
        ),
        new_code_cell(
            "steps = d.derive_lemma_3_1()\n"
            "for name, expr in steps.items():\n"
            "    display(sp.Eq(sp.Symbol(name), expr, evaluate=False))"
        ),
        new_markdown_cell(
            "## Check against brute force over the trinomial\n\nFor small concrete $N$, summing "
            "the multinomial probabilities of every qualifying count vector gives the same "
            "polynomial."
        ),
        new_code_cell(
            "n_values = range(1, 4) if FAST else range(1, 8)\nprint('Lemma 3.1 == trinomial sum "
            "for N in', list(n_values), ':', d.check_lemma_3_1(n_values))\n"
            "d.trinomial_tail_miss(3)"
        ),
        new_markdown_cell(
            "## Boundary behaviour\n\n"
            "$P = 0$ at $N = 1$ (one rollout is never mixed) and $P \\to 0$ as $N \\to \\infty$ "
            "(a huge group always contains $E$), so $P$ must peak in between."
        ),
        new_code_cell(
            "print('P(B) at N = 1:', d.value_at_group_size_one())\n"
            "print('lim N->oo   :', d.limit_large_group())"
        ),
        new_markdown_cell(
            "## The stationary point\n\n$dP/dN$ is a sum of three exponentials in $N$ with a "
            "single sign change, so it has one root $N_c$; `tail_miss.stationary_group_size` "
            "solves it numerically."
        ),
        new_code_cell(
            "display(d.stationary_condition())\nfrom fgrpo_theory.tail_miss import "
            "stationary_group_size\nn_c = stationary_group_size(0.3, 0.015)\nprint('N_c(mu=0.3, "
            "tau=0.015) =', n_c, ' dP/dN there =', float(d.lambdify(d.dP_dN_expr())(0.3, 0.015, "
            "n_c)))"
        ),
    ],
)

for nb, path in ((nb1, HERE / "01_tail_miss.ipynb"), (nb2, HERE / "02_derivations.ipynb")):
    nbformat.validate(nb)
    nbformat.write(nb, path)
    print("wrote", path)
