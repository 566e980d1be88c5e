"""When a progress bar shows: asked for, not switched off (``--no-progress`` sets tqdm's own
``TQDM_DISABLE`` for a command and its worker processes), and stderr a terminal.

    bar = tqdm(total=steps, file=sys.stderr, disable=bar_disabled(progress))
"""

from __future__ import annotations

import os


def bar_disabled(progress: bool = True) -> bool | None:
    """tqdm's ``disable`` for a bar the caller would show when ``progress``: True when not
    ``progress`` or when ``TQDM_DISABLE`` is set (to anything but empty, 0 or false), else None,
    which tqdm reads as "off when the bar's stream is not a terminal"."""
    if not progress:
        return True
    if os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false"):
        return True
    return None
