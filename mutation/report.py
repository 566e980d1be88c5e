"""Per-module kill rates of the last ``mutmut run`` (``make mutation`` prints this at the end).

Reads mutmut's per-file results (``mutants/<path>.meta``), counts each module's mutants by
outcome and prints the kill rate (killed + timed out, over all mutants: a mutant not run yet
counts as not killed), then the survivors
judged equivalent (``mutation/equivalent.md``) and any survivor not listed there. Exit status 1
when a module is below the 90% target or a survivor is neither killed nor listed.

    python mutation/report.py            # after: mutmut run
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.90
#: mutmut's exit-code meanings (mutmut/stats.py); anything else is "suspicious".
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "segfault",
    -9: "segfault",
    None: "not checked",
}


def equivalent_names(path: Path) -> dict[str, str]:
    """Mutant name -> reason, from the lines '- `name`: reason' of equivalent.md."""
    out = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        m = re.match(r"-\s+`([^`]+)`:\s*(.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    modules = config["only_mutate"]
    equivalent = equivalent_names(ROOT / "mutation" / "equivalent.md")
    failed = False
    unlisted = []
    print(
        f"{'module':32s} {'mutants':>7s} {'killed':>7s} {'timeout':>7s} {'survived':>8s} "
        f"{'no tests':>8s} {'equiv.':>6s} {'unrun':>6s} {'kill rate':>9s}"
    )
    totals = Counter()
    for module in modules:
        meta = ROOT / "mutants" / f"{module}.meta"
        if not meta.exists():
            print(f"{module:32s} no results (run: mutmut run)")
            failed = True
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        c = Counter(STATUS.get(code, "suspicious") for code in codes.values())
        survivors = [
            k
            for k, code in codes.items()
            if STATUS.get(code, "suspicious") not in ("killed", "timeout", "not checked")
        ]
        listed = [k for k in survivors if k in equivalent]
        unlisted += [
            (k, STATUS.get(codes[k], "suspicious")) for k in survivors if k not in equivalent
        ]
        total = len(codes)
        rate = (c["killed"] + c["timeout"]) / total if total else 0.0
        failed |= rate < TARGET
        totals.update(c)
        totals["total"] += total
        totals["equivalent"] += len(listed)
        print(
            f"{module:32s} {total:7d} {c['killed']:7d} {c['timeout']:7d} {c['survived']:8d} "
            f"{c['no tests']:8d} {len(listed):6d} {c['not checked']:6d} {100 * rate:8.1f}%"
        )
    if totals["total"]:
        rate = (totals["killed"] + totals["timeout"]) / totals["total"]
        print(
            f"{'all':32s} {totals['total']:7d} {totals['killed']:7d} {totals['timeout']:7d} "
            f"{totals['survived']:8d} {totals['no tests']:8d} {totals['equivalent']:6d} "
            f"{totals['not checked']:6d} {100 * rate:8.1f}%"
        )
    print(f"\nsurvivors judged equivalent (mutation/equivalent.md): {len(equivalent)}")
    for name, reason in equivalent.items():
        print(f"  {name}: {reason}")
    if unlisted:
        failed = True
        print(f"\nsurvivors neither killed nor listed as equivalent: {len(unlisted)}")
        for name, status in unlisted:
            print(f"  {name} ({status}); see: mutmut show {name}")
    verdict = "FAILED" if failed else "met"
    print(f"\ntarget: >= {100 * TARGET:.0f}% killed in each module: {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
