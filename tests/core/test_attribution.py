from __future__ import annotations

from tenantry.core import attribution
from tenantry.core.models import AgentProduct, Principal


def test_roundtrip_with_awkward_values() -> None:
    p = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "a;b=c%d e", "h", "chem")
    tag = attribution.encode(p, "t12")
    assert tag.startswith("tenantry:v1;")
    assert " " not in tag and tag.count(";") == 5
    assert attribution.parse(f"user text {tag} more") == {
        "agent": "claude-code",
        "session": "a;b=c%d e",
        "user": "alice",
        "project": "chem",
        "job": "t12",
    }


def test_absent_or_other_comments() -> None:
    assert attribution.parse(None) is None
    assert attribution.parse("") is None
    assert attribution.parse("just a human comment") is None


def test_empty_fields_are_omitted() -> None:
    tag = attribution.encode(Principal(1, "bob"))
    assert tag == "tenantry:v1;agent=human;user=bob"
    assert attribution.parse(tag) == {"agent": "human", "user": "bob"}
