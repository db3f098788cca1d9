"""Fixtures for policy tests: a judge over the corpus facts, principals."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.core.models import AgentProduct, Principal
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge

HERE = Path(__file__).parent
FACTS = HERE / "facts.json"
CASES = HERE / "cases.jsonl"
CWD = "/home/alice/proj"


@pytest.fixture(scope="session")
def facts() -> Facts:
    return Facts.load(FACTS)


@pytest.fixture(scope="session")
def judge(facts: Facts) -> Judge:
    return Judge(Engine(), facts, read_files=False, hour=12)


@pytest.fixture
def agent() -> Principal:
    return Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1", project="chem")


@pytest.fixture
def human() -> Principal:
    return Principal(1000, "alice")
