"""Parse a shell string into the simple commands it would run (tree-sitter-bash).

``parse(text)`` walks the syntax tree and returns every simple command the
string can start: pipeline stages, list members, subshells, function bodies,
loop bodies, ``$(...)``/backtick/process substitutions, with each word
evaluated the way bash would (quotes removed, ``$'..'`` decoded, ``sc''ancel``
joined). Words that bash computes at run time (``$VAR``, ``$(...)``) are kept
as their source text and marked dynamic. Anything the parser cannot read with
confidence (syntax errors, a computed command name, a glob in a command name)
is reported in ``Parsed.uncertain`` so the caller can deny or ask.

Wrappers (``sudo``, ``env``, ``bash -c``, ``eval``) are unwrapped afterwards by
:mod:`tenantry.safety.policy.unwrap`; this module only reads syntax.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tenantry.safety.policy.execopts import COMMAND_VARS

MAX_DEPTH = 8
_GLOB = re.compile(r"[*?\[]")
_BRACE = re.compile(r"\{[^{}]*,[^{}]*\}|\{[^{}]*\.\.[^{}]*\}")
_BACKSLASH = re.compile(r"\\(.)", re.S)


@dataclass(slots=True)
class Word:
    """One evaluated shell word: ``text`` as bash would pass it, or source text if dynamic."""

    text: str
    dynamic: bool = False
    glob: bool = False
    # "variable" (only $VAR expansions) or "substitution" ($(...), arithmetic, ...)
    dynamic_kind: str = ""


@dataclass(slots=True)
class SimpleCommand:
    """A command that would be executed, before wrapper unwrapping."""

    words: list[Word]
    assigns: dict[str, Word] = field(default_factory=dict)
    # (operator, target word) for file redirects: ">", ">>", "<", "&>", ...
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    stdin_text: str | None = None  # static here-string / heredoc body
    stdin_dynamic: bool = False  # stdin comes from a pipe or a dynamic redirect
    piped_from: SimpleCommand | None = None

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]


@dataclass(slots=True)
class Parsed:
    commands: list[SimpleCommand] = field(default_factory=list)
    # (kind, reason): kind "syntax" | "name" | "variable" | "depth"
    uncertain: list[tuple[str, str]] = field(default_factory=list)
    functions: dict[str, str] = field(default_factory=dict)
    assigned: set[str] = field(default_factory=set)  # shell variables set or exported
    # argument words whose value comes from a command substitution (directly or
    # through a variable assigned from one): paths nobody can read statically
    computed: set[str] = field(default_factory=set)
    # values given to variables that programs run as commands (``export GIT_SSH_COMMAND=``)
    command_vars: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)  # static values of ``assigned``


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def parse(text: str, variables: dict[str, str] | None = None, depth: int = 0) -> Parsed:
    """Every simple command ``text`` would run, with uncertainty reported."""
    out = Parsed()
    if depth > MAX_DEPTH:
        out.uncertain.append(("depth", f"shell nesting deeper than {MAX_DEPTH}"))
        return out
    if "\x00" in text:
        out.uncertain.append(("syntax", "NUL byte in a shell string"))
        return out
    if "\\\n" in text:
        text = join_continuations(text)
    tree = _parser().parse(text.encode("utf-8", "surrogatepass"))
    root = tree.root_node
    if root.has_error:
        out.uncertain.append(("syntax", "the shell text does not parse cleanly"))
    _Walker(out, dict(variables or {})).stmt(root)
    return out


class _Walker:
    def __init__(self, out: Parsed, variables: dict[str, str]) -> None:
        self.out = out
        self.vars = variables
        self.quoted = 0
        self.tainted: set[str] = set()  # variables assigned from $(...) in this text

    # --- statements -------------------------------------------------------

    def stmt(self, node: Any, redirects: list[Any] | None = None) -> list[SimpleCommand]:
        """Walk a statement; returns the top-level simple commands it produced."""
        t = node.type
        if t == "command":
            cmd = self.command(node, redirects or [])
            return [cmd] if cmd is not None else []
        if t in ("ERROR",) or node.is_missing:
            self.out.uncertain.append(("syntax", f"unparsable shell near {_snip(node)}"))
        if t == "redirected_statement":
            body = node.child_by_field_name("body")
            reds = [c for c in node.children if c is not body]
            if body is None:
                for r in reds:
                    self.redirect_words(r)
                return []
            cmds = self.stmt(body, reds)
            if body.type != "command":
                for r in reds:
                    self.redirect_words(r)
            return cmds
        if t == "pipeline":
            produced: list[SimpleCommand] = []
            prev: SimpleCommand | None = None
            for c in node.named_children:
                cmds = self.stmt(c)
                if cmds and prev is not None:
                    cmds[0].stdin_dynamic = True
                    cmds[0].piped_from = prev
                if cmds:
                    prev = cmds[-1]
                produced.extend(cmds)
            return produced
        if t == "variable_assignment":
            self.assignment(node)
            return []
        if t == "declaration_command":
            for c in node.named_children:
                if c.type == "variable_assignment":
                    self.assignment(c)
                else:
                    self.word(c)
            return []
        if t == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.out.functions[_text(name)] = _text(body)
        if t in ("heredoc_body", "comment"):
            return []
        if t in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect_words(node)
            return []
        if t in ("word", "string", "concatenation", "command_substitution", "expansion"):
            self.word(node)
            return []
        produced = []
        for c in node.named_children:
            produced.extend(self.stmt(c))
        return produced

    def assignment(self, node: Any) -> tuple[str, Word]:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        name = _text(name_node) if name_node is not None else ""
        w = self.word(value) if value is not None else Word("")
        self.out.assigned.add(name)
        if name:
            self._set(name, w)
        return name, w

    def _set(self, name: str, w: Word) -> None:
        if name in COMMAND_VARS:
            if w.dynamic:
                self.out.uncertain.append(("name", f"{name} holds a command computed at run time"))
            else:
                self.out.command_vars[name] = w.text
        if w.dynamic:
            self.vars.pop(name, None)
            self.out.values.pop(name, None)
            if w.dynamic_kind == "substitution":
                self.tainted.add(name)
        else:
            self.vars[name] = w.text
            self.out.values[name] = w.text
            self.tainted.discard(name)

    def command(self, node: Any, redirects: list[Any]) -> SimpleCommand | None:
        cmd = SimpleCommand(words=[])
        for c in node.children:
            t = c.type
            if t == "variable_assignment":
                name_node = c.child_by_field_name("name")
                value = c.child_by_field_name("value")
                name = _text(name_node) if name_node is not None else ""
                cmd.assigns[name] = self.word(value) if value is not None else Word("")
            elif t == "command_name":
                inner = c.named_children[0] if c.named_children else c
                w = self.word(inner)
                if w.glob or (_BRACE.search(w.text) and not w.dynamic):
                    self.out.uncertain.append(
                        ("name", f"command name {w.text!r} is expanded by the shell")
                    )
                if w.dynamic:
                    kind = "variable" if w.dynamic_kind == "variable" else "name"
                    self.out.uncertain.append(
                        (kind, f"command name {w.text!r} is computed at run time")
                    )
                cmd.words.append(w)
            elif t in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self.attach_redirect(cmd, c)
            elif c.is_named and t not in ("comment",):
                w = self.word(c)
                if _BRACE.search(w.text) and not w.dynamic:
                    w.glob = True
                if w.dynamic and w.dynamic_kind == "substitution":
                    self.out.computed.add(w.text)
                cmd.words.append(w)
        for r in redirects:
            self.attach_redirect(cmd, r)
        if not cmd.words:
            # bare assignments: they set shell variables for later commands
            for name, w in cmd.assigns.items():
                self.out.assigned.add(name)
                self._set(name, w)
            if not cmd.redirects:
                return None
        self.out.commands.append(cmd)
        return cmd

    # --- redirects ----------------------------------------------------------

    def redirect_words(self, node: Any) -> None:
        tmp = SimpleCommand(words=[])
        self.attach_redirect(tmp, node)
        if tmp.redirects:
            self.out.commands.append(tmp)

    def attach_redirect(self, cmd: SimpleCommand, node: Any) -> None:
        t = node.type
        if t == "herestring_redirect":
            body = node.named_children[-1] if node.named_children else None
            w = self.word(body) if body is not None else Word("")
            if w.dynamic:
                cmd.stdin_dynamic = True
            else:
                cmd.stdin_text = w.text + "\n"
            return
        if t == "heredoc_redirect":
            body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
            start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
            quoted = start is not None and any(q in _text(start) for q in "'\"\\")
            if body is not None:
                if not quoted:
                    for c in body.named_children:
                        self.word(c)  # $(...) in an unquoted heredoc runs
                cmd.stdin_text = _text(body)
            for c in node.named_children:
                if c.type in ("heredoc_start", "heredoc_body", "heredoc_end"):
                    continue
                # tree-sitter-bash puts "| next" after "<<EOF" inside the redirect
                stages = c.named_children if c.type == "pipeline" else [c]
                prev = cmd
                for st in stages:
                    cmds = self.stmt(st)
                    if cmds and c.type == "pipeline":
                        cmds[0].stdin_dynamic = True
                        cmds[0].piped_from = prev
                        prev = cmds[-1]
            return
        if t == "file_redirect":
            op = ""
            target: Any = None
            for c in node.children:
                if not c.is_named:
                    op = op or _text(c)
                elif c.type != "file_descriptor" and target is None:
                    # the first: in ``> /dev/tcp/h/p 0>&1`` the grammar gives this
                    # redirect the next one's descriptor ``0`` as a second child
                    target = c
            if target is None:
                return
            w = self.word(target)
            if op in ("<", "<>") and w.dynamic:
                cmd.stdin_dynamic = True
            if (op.endswith("&") and w.text.isdigit()) or w.text == "-":
                return
            cmd.redirects.append((op, w))

    # --- words ----------------------------------------------------------------

    def word(self, node: Any) -> Word:
        t = node.type
        if t == "word":
            raw = _text(node)
            text = _BACKSLASH.sub(r"\1", raw.replace("\\\n", ""))
            return Word(text, glob=bool(_GLOB.search(_BACKSLASH.sub("", raw))))
        if t == "number":
            return Word(_text(node))
        if t == "raw_string":
            return Word(_text(node)[1:-1])
        if t == "ansi_c_string":
            return Word(_ansi_c(_text(node)[2:-1]))
        if t in ("string", "translated_string"):
            self.quoted += 1
            try:
                return self.join(node.named_children, quoted=True)
            finally:
                self.quoted -= 1
        if t == "string_content":
            return Word(re.sub(r'\\([\\"$`])', r"\1", _text(node).replace("\\\n", "")))
        if t == "concatenation":
            return self.join(node.children, quoted=False)
        if t == "simple_expansion" or t == "expansion":
            return self.expansion(node)
        if t in ("command_substitution", "process_substitution"):
            self.substitution(node)
            return Word(_text(node), dynamic=True, dynamic_kind="substitution")
        if t in ("arithmetic_expansion",):
            for c in node.named_children:
                self.stmt(c)
            return Word(_text(node), dynamic=True, dynamic_kind="substitution")
        if t == "brace_expression":
            return Word(_text(node), glob=True)
        if t == "ERROR":
            self.out.uncertain.append(("syntax", f"unparsable shell near {_snip(node)}"))
            return Word(_text(node), dynamic=True, dynamic_kind="substitution")
        # anything else (test operators, regexes, ...): walk for substitutions
        dynamic = False
        for c in node.named_children:
            if self.word(c).dynamic:
                dynamic = True
        return Word(_text(node), dynamic=dynamic, dynamic_kind="substitution" if dynamic else "")

    def join(self, children: list[Any], *, quoted: bool) -> Word:
        parts: list[str] = []
        dynamic = glob = False
        kind = ""
        for c in children:
            if not c.is_named:
                if c.type == '"':
                    continue
                if quoted:
                    parts.append(_text(c))
                    continue
                w = Word(_BACKSLASH.sub(r"\1", _text(c)), glob=bool(_GLOB.search(_text(c))))
            else:
                w = self.word(c)
            parts.append(w.text)
            if w.dynamic:
                dynamic = True
                if w.dynamic_kind != "variable" or kind == "substitution":
                    kind = "substitution"
                else:
                    kind = "variable"
            glob = glob or (w.glob and not quoted)
        return Word("".join(parts), dynamic=dynamic, glob=glob, dynamic_kind=kind)

    def expansion(self, node: Any) -> Word:
        names = [c for c in node.named_children if c.type == "variable_name"]
        simple = len(node.named_children) == 1 and len(names) == 1
        if simple:
            name = _text(names[0])
            value = self.vars.get(name)
            # unquoted expansions are split on IFS: only a plain word is static
            static = value is not None and (self.quoted or not re.search(r"\s", value))
            if static and value is not None and "IFS" not in self.out.assigned:
                return Word(value)
            kind = "substitution" if name in self.tainted else "variable"
            return Word(_text(node), dynamic=True, dynamic_kind=kind)
        kind = "substitution" if _text(node).startswith("${!") else "variable"
        for c in node.named_children:
            if c.type != "variable_name":
                w = self.word(c)
                if w.dynamic and w.dynamic_kind != "variable":
                    kind = "substitution"
        return Word(_text(node), dynamic=True, dynamic_kind=kind)

    def substitution(self, node: Any) -> None:
        for c in node.named_children:
            self.stmt(c)


def join_continuations(text: str) -> str:
    """Drop backslash-newline outside single quotes, as bash does before splitting words."""
    out: list[str] = []
    i, n = 0, len(text)
    single = False
    while i < n:
        ch = text[i]
        if single:
            out.append(ch)
            single = ch != "'"
        elif ch == "'":
            single = True
            out.append(ch)
        elif ch == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _ansi_c(body: str) -> str:
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


def _text(node: Any) -> str:
    raw: bytes = node.text or b""
    return raw.decode("utf-8", "replace")


def _snip(node: Any) -> str:
    return repr(_text(node)[:40])
