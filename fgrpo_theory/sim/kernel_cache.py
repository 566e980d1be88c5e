"""numba's on-disk cache of a module's kernels, kept in step with every source file the kernels
are built from.

numba keys a cached kernel on the source file that defines it, and on nothing else: a kernel of
``compiled`` that inlines a ``fast_exp`` function, or reads a constant of ``samplers``, is
loaded from the cache unchanged after only that other file changed (numba's documented limit
on cache invalidation). A fresh install rewrites every file, but a ``git pull`` or a local edit
may change one file only, and the engine would then run the old code.

``drop_stale`` keeps a stamp beside the cached kernels, a hash of all the files they are built
from (``sources_stamp``), and when the stamp differs deletes the module's cached kernels, so
that numba compiles them afresh.

    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "compiled._run_steps-1.py311.nbi").write_bytes(b"old")
    >>> drop_stale(folder, "compiled", "stamp-1")      # no stamp yet: the kernel goes
    1
    >>> drop_stale(folder, "compiled", "stamp-1")      # the same sources: nothing to do
    0
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def sources_stamp(paths) -> str:
    """A hash of the files ``paths`` (their names and bytes, in the order given)."""
    h = hashlib.sha256()
    for path in map(Path, paths):
        data = path.read_bytes()
        h.update(f"{path.name}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def drop_stale(folder, module: str, stamp: str) -> int:
    """Delete the cached kernels of ``module`` (numba's ``module.*.nbi`` index and
    ``module.*.nbc`` data files) in ``folder`` unless the folder's stamp file for the module
    holds ``stamp``, then write the stamp. Returns how many files were deleted.

    A folder that cannot be read or written is left alone (numba then finds no kernel there,
    or compiles without a cache). Two processes that do this at once both delete and both
    write the same stamp; at worst a kernel is compiled twice."""
    folder = Path(folder)
    stamp_file = folder / f"{module}.sources"
    try:
        if stamp_file.read_text() == stamp:
            return 0
    except OSError:
        pass  # no stamp yet: the cached kernels, if any, are of unknown sources
    dropped = 0
    try:
        for path in [*folder.glob(f"{module}.*.nbi"), *folder.glob(f"{module}.*.nbc")]:
            path.unlink(missing_ok=True)
            dropped += 1
        tmp = folder / f"{module}.sources.{os.getpid()}.tmp"
        tmp.write_text(stamp)
        os.replace(tmp, stamp_file)
    except OSError:
        pass
    return dropped
