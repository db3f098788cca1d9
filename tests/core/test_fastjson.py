"""The client's JSON (``_json`` driven directly) writes and reads what ``json`` does."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from tenantry.client import fastjson

VALUES: list[object] = [
    {},
    [],
    "",
    "plain",
    'é ✓ \U0001f600 \x00 \n " \\ \t',
    0,
    -1,
    2**70,
    1.5,
    -0.0,
    1e300,
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    {"argv": ["sh", "-c", "echo 'hi' > /dev/null"], "cwd": "/tmp/x y", "env": {"A": "1"}},
    {"nested": [{"a": [1, [2, [3, {"b": None}]]]}], "k": {"z": 1, "a": 2}},
    {1: "int key", 2.5: "float key", None: "none key"},
    {True: "bool key"},
    ("a", "tuple"),
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_dumps_is_json_dumps(value: object) -> None:
    assert fastjson.dumps(value) == json.dumps(value)


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_loads_reads_json(value: object) -> None:
    text = json.dumps(value, indent=2)
    assert fastjson.loads(text) == json.loads(text)
    assert fastjson.loads(f" \n{text}\r\n".encode()) == json.loads(text)


def test_constants_and_errors() -> None:
    assert math.isnan(fastjson.loads("NaN")) and fastjson.loads("-Infinity") == float("-inf")
    for bad in ("", "  ", "{", '{"a": }', "[1,]", "{} {}", "nul", b"\xff", "'x'"):
        with pytest.raises(ValueError):
            fastjson.loads(bad)
    with pytest.raises(TypeError, match="not JSON serializable"):
        fastjson.dumps({"x": object()})


def test_it_imports_neither_json_nor_re() -> None:
    probe = "import sys, tenantry.client.fastjson as f; f.loads(f.dumps({'a': [1]}));"
    probe += "print(sorted({'json', 're', 'enum'} & set(sys.modules)))"
    # pytest-cov measures subprocesses by importing coverage (and json) at start
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
