"""The helpers that ``fgrpo_theory`` and ``fgrpo_llm`` both use, below both (it imports neither):

- ``checks``: argument checks of the library functions (one ``TypeError`` / ``ValueError``
  naming the argument and the value);
- ``fields``: the field rules every config dataclass checks itself with;
- ``cli``: the subcommand parser, the one-line error runner, the list and KEY=VALUE parsers;
- ``files``: files written through a temporary sibling and a rename (text, strict JSON, binary,
  figures, whole directories), JSON read with clear errors, and one process at a time in a
  directory (the one ``flock`` lock);
- ``pool``: the one pool of worker processes (the simulator's sweep, the experiments' runs);
- ``timer``: wall and CPU seconds of a computation and its phases;
- ``environment``: what a computation ran on (versions, git commit, CPU and its vector flags);
- ``exports``: a package's public names, each imported from its module on first use.
"""

from importlib.metadata import PackageNotFoundError, version

try:  # the version of the installed distribution (pyproject.toml's, one for the three packages)
    __version__ = version("fgrpo")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
del PackageNotFoundError, version
