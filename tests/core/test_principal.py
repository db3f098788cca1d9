from __future__ import annotations

import pytest

from tenantry.client.principal import client_claims, detect_agent
from tenantry.core.models import AgentProduct


@pytest.mark.parametrize(
    ("env", "product", "session"),
    [
        ({}, AgentProduct.HUMAN, ""),
        ({"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "abc"}, AgentProduct.CLAUDE_CODE, "abc"),
        ({"CLAUDE_CODE_SESSION_ID": "s2"}, AgentProduct.CLAUDE_CODE, "s2"),
        ({"CODEX_THREAD_ID": "th"}, AgentProduct.CODEX, "th"),
        ({"CODEX_SANDBOX": "seatbelt"}, AgentProduct.CODEX, ""),
        ({"CODEX_SANDBOX_NETWORK_DISABLED": "1"}, AgentProduct.CODEX, ""),
        ({"GEMINI_CLI": "1"}, AgentProduct.GEMINI_CLI, ""),
        ({"OPENCODE": "1"}, AgentProduct.OPENCODE, ""),
        ({"OPENCODE_BIN_PATH": "/x"}, AgentProduct.OPENCODE, ""),
        ({"CURSOR_AGENT": "1"}, AgentProduct.CURSOR, ""),
        ({"OPENHANDS_SESSION_ID": "oh"}, AgentProduct.OPENHANDS, "oh"),
        ({"CLAUDECODE": ""}, AgentProduct.HUMAN, ""),
        ({"TENANTRY_AGENT": "codex", "TENANTRY_SESSION": "x"}, AgentProduct.CODEX, "x"),
        ({"TENANTRY_AGENT": "weird"}, AgentProduct.OTHER_AGENT, ""),
    ],
)
def test_detect(env: dict[str, str], product: AgentProduct, session: str) -> None:
    assert detect_agent(env) == (product, session)


def test_claims_carry_no_uid() -> None:
    claims = client_claims({"CLAUDECODE": "1", "SLURM_ACCOUNT": "chem"})
    assert claims["agent"] == "claude-code"
    assert claims["project"] == "chem"
    assert "uid" not in claims and "user" not in claims
