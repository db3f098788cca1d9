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
``hook --agent NAME`` as ``tenantry``'s (so installs recognise their entries).
"""

from __future__ import annotations

import sys


def package_root(path: str) -> str:
    """The directory holding the ``tenantry`` package of this file (``.../agents/x.py``)."""
    return path.rsplit("/", 3)[0]


if __name__ == "__main__":
    sys.path.insert(0, package_root(__file__))
    from tenantry.cli.main import main

    sys.exit(main(sys.argv[1:]))
