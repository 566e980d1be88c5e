"""The helpers that ``fgrpo_theory`` and ``fgrpo_llm`` both use, below both (it imports neither):

- ``checks``: argument checks of the library functions (one ``TypeError`` / ``ValueError``
  naming the argument and the value);
- ``fields``: the field rules every config dataclass checks itself with;
- ``cli``: the subcommand parser, the one-line error runner, the list and KEY=VALUE parsers;
- ``files``: files written through a temporary sibling and a rename (text, binary, figures);
- ``environment``: what a computation ran on (versions, git commit, CPU and its vector flags);
- ``exports``: a package's public names, each imported from its module on first use.
"""
