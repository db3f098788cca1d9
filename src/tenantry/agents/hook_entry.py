"""The command hook as a script: ``PYTHON -I -S .../agents/hook_entry.py hook --agent NAME``.

An agent starts its command hook for every shell command, and the console
script ``tenantry`` pays for what the hook never uses: the ``site`` module
(the site-packages directories, their ``.pth`` files; about half of an
interpreter start) and the ``re`` import of the generated script.
``tenantry install`` writes this form for user and system installs
(``products.common.hook_command``): ``-I`` ignores ``PYTHON*`` variables and
the script's directory, ``-S`` skips ``site``, and the package is found from
this file's own path. The hook imports only the standard library, so it needs
no site-packages; anything else it starts (the daemon, at a session start) is
a new interpreter with its normal paths. The command line is the same
``hook --agent NAME`` as ``tenantry``'s (so installs recognise their entries);
any other is refused with exit code 2, which agents take as "blocked".
"""

from __future__ import annotations

import sys


def package_root(path: str) -> str:
    """The directory holding the ``tenantry`` package of this file (``.../agents/x.py``)."""
    return path.rsplit("/", 3)[0]


def main(argv: list[str]) -> int:
    """``hook --agent NAME``, as ``tenantry`` reads it; anything else is refused (exit 2)."""
    from tenantry.agents.hook_fast import AGENTS
    from tenantry.agents.hook_fast import main as hook_main

    if len(argv) != 3 or argv[:2] != ["hook", "--agent"] or argv[2] not in AGENTS:
        sys.stderr.write(
            f"usage: {sys.argv[0]} hook --agent {{{','.join(AGENTS)}}}"
            " (written by `tenantry install`; run it again to repair)\n"
        )
        return 2
    return hook_main(argv[2])


if __name__ == "__main__":
    sys.path.insert(0, package_root(__file__))
    sys.exit(main(sys.argv[1:]))
