"""The trigram prefilter never drops a file the regex matches, and prunes when it can."""

from __future__ import annotations

import random
import re
import sqlite3

import pytest

from tenantry.index.trigram import fts_query, required

ALPHABET = "abcdeXY _.\n"


def _fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE g USING fts5(body, content='', tokenize='trigram',"
        " detail='none', columnsize=0)"
    )
    return conn


def _random_pattern(rnd: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rnd.randint(1, 4)):
        r = rnd.random()
        if r < 0.5:
            parts.append("".join(rnd.choices("abcdeXY ", k=rnd.randint(1, 5))))
        elif r < 0.6:
            parts.append(rnd.choice([".", r"\w", "[ab]", "[^c]", r"\s", "\\."]))
        elif r < 0.75 and depth < 2:
            alts = [_random_pattern(rnd, depth + 1) for _ in range(rnd.randint(2, 3))]
            parts.append("(" + "|".join(alts) + ")")
        elif r < 0.9 and depth < 2:
            parts.append("(?:" + _random_pattern(rnd, depth + 1) + ")" + rnd.choice("*+?"))
        else:
            parts.append(rnd.choice(["^", "$", r"\b"]))
    return "".join(parts)


@pytest.mark.parametrize("seed", range(4))
def test_prefilter_is_sound(seed: int) -> None:
    rnd = random.Random(seed)
    conn = _fts()
    docs = ["".join(rnd.choices(ALPHABET, k=rnd.randint(0, 60))) for _ in range(150)]
    for i, d in enumerate(docs):
        conn.execute("INSERT INTO g (rowid, body) VALUES (?, ?)", (i, d))
    pruned = 0
    for _ in range(150):
        pattern = _random_pattern(rnd)
        flags = re.IGNORECASE if rnd.random() < 0.3 else 0
        rx = re.compile(pattern, flags)
        q = fts_query(required(pattern, flags))
        selected = (
            set(range(len(docs)))
            if q is None
            else {r[0] for r in conn.execute("SELECT rowid FROM g WHERE g MATCH ?", (q,))}
        )
        matching = {i for i, d in enumerate(docs) if any(rx.search(line) for line in d.split("\n"))}
        assert matching <= selected, (pattern, flags, q)
        pruned += len(docs) - len(selected)
    assert pruned > 0  # the prefilter does prune


def test_required_literals() -> None:
    assert required("needle") == "needle"
    assert required("ab") is None
    assert required("x?abcd") == "abcd"
    assert required("(foo|barbaz)qux") == ("and", [("or", ["foo", "barbaz"]), "qux"])
    assert required("(foo|ba)") is None  # a branch with nothing required
    assert required("a.*b") is None
    assert required("(?:hello)+ world") == ("and", ["hello", " world"])
    assert required("(unclosed") is None
    conn = _fts()  # quotes inside literals are escaped, not syntax
    conn.execute("INSERT INTO g (rowid, body) VALUES (1, 'they say \"hi\" twice'), (2, 'say hi')")
    q = fts_query(required('say "hi"'))
    assert [r[0] for r in conn.execute("SELECT rowid FROM g WHERE g MATCH ?", (q,))] == [1]


@pytest.mark.parametrize("seed", range(3))
def test_whole_text_scan_finds_the_same_lines_as_line_by_line(seed: int) -> None:
    from tenantry.index.grep import GrepSpec, file_items, whole_text_ok

    rnd = random.Random(100 + seed)
    extra = [r"x[^a]*y", r"(?<!a)b", r"c(?=\n)", r"^", r"$", r"\s+", r"a|$"]
    for _ in range(300):
        pattern = rnd.choice(extra) if rnd.random() < 0.2 else _random_pattern(rnd)
        rx = re.compile(pattern, re.MULTILINE)
        text = "".join(rnd.choices(ALPHABET + "xy\n", k=rnd.randint(0, 80)))
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        want = [i + 1 for i, line in enumerate(lines) if rx.search(line)]
        spec = GrepSpec(pattern)
        got = [it["line"] for it in file_items("p", text, rx, spec, whole_text_ok(pattern))]
        assert got == want, (pattern, text)
        listed = file_items("p", text, rx, GrepSpec(pattern, files_only=True), True)
        assert bool(listed) == bool(want) or not whole_text_ok(pattern), (pattern, text)
