"""``tenantry completion bash|zsh``: a shell completion script.

Commands come from the CLI's command table; a command's options are read
from its own ``--help`` when first completed, so the script never goes stale.
Standard library only.

    eval "$(tenantry completion bash)"      # in ~/.bashrc
    eval "$(tenantry completion zsh)"       # in ~/.zshrc (uses bashcompinit)
"""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BASH = """\
_tenantry() {
  local cur cmd i
  cur="${COMP_WORDS[COMP_CWORD]}"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      --socket|--state-dir) ((i++)) ;;
      -*) ;;
      *) cmd="${COMP_WORDS[i]}"; break ;;
    esac
  done
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "__COMMANDS__ --socket --state-dir --version --help" -- "$cur"))
  elif [[ "$cur" == -* ]]; then
    local opts
    opts=$(tenantry "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _tenantry tenantry
"""


def script(shell: str, commands: list[str]) -> str:
    body = BASH.replace("__COMMANDS__", " ".join(sorted(commands)))
    if shell == "zsh":
        body = "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def register(sub: Any) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='examples:\n  eval "$(tenantry completion bash)"   # add to ~/.bashrc\n'
        '  eval "$(tenantry completion zsh)"    # add to ~/.zshrc',
    )
    p.add_argument("shell", choices=["bash", "zsh"], help="your shell")
    p.set_defaults(handler=_completion)


def _completion(args: argparse.Namespace) -> int:
    from tenantry.cli.main import COMMANDS

    sys.stdout.write(script(args.shell, list(COMMANDS)))
    return 0
