"""Which paths the index skips: ``.gitignore`` / ``.ignore`` rules, and ``.git`` itself.

Each directory may hold ignore files whose patterns are relative to that
directory. A path is judged by the deepest directory whose rules match it
(git's precedence: a deeper file overrides a shallower one, and within a file
the last matching pattern wins, ``!pattern`` re-includes). A path inside an
ignored directory is never seen, because the crawler does not descend into
it, which is git's "cannot re-include under an excluded parent" rule.

Pattern matching itself is ``pathspec.GitIgnoreSpec`` (MPL-2.0), a maintained
implementation of git's wildmatch rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pathspec import GitIgnoreSpec

IGNORE_FILES = (".gitignore", ".ignore")
ALWAYS_SKIPPED = frozenset({".git"})


@dataclass(frozen=True, slots=True)
class Rules:
    """The compiled ignore rules of one directory (``base`` relative to the root)."""

    base: str
    spec: GitIgnoreSpec


def compile_rules(base: str, texts: Sequence[str]) -> Rules | None:
    """Compile the ignore files' texts of directory ``base``; None if they hold no rule."""
    lines = [line for text in texts for line in text.splitlines()]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return None
    return Rules(base, GitIgnoreSpec.from_lines(lines))


def is_ignored(chain: Sequence[Rules], rel: str, is_dir: bool) -> bool:
    """Whether ``rel`` (relative to the workspace root) is ignored by ``chain``.

    ``chain`` holds the rules of the path's ancestor directories, shallowest first.
    """
    name = rel.rsplit("/", 1)[-1]
    if name in ALWAYS_SKIPPED and is_dir:
        return True
    for rules in reversed(chain):
        local = rel if not rules.base else rel[len(rules.base) + 1 :]
        if is_dir:
            local += "/"
        verdict = rules.spec.check_file(local).include
        if verdict is not None:
            return bool(verdict)
    return False


class GlobFilter:
    """ripgrep-style ``-g`` globs: gitignore syntax, ``!glob`` excludes, last match wins.

    With at least one positive glob, a file must match one to pass. As ripgrep
    applies globs while it walks, a directory matched by a ``!glob`` hides
    everything under it.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        self._positive = any(not g.startswith("!") for g in globs)
        # invert: a plain glob means "include", which is an ignore-spec "match"
        self._spec = GitIgnoreSpec.from_lines(list(globs)) if globs else None

    def __call__(self, rel: str) -> bool:
        if self._spec is None:
            return True
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self._spec.check_file("/".join(parts[:i]) + "/").include is False:
                return False
        verdict = self._spec.check_file(rel).include
        if verdict is None:
            return not self._positive
        return bool(verdict)
