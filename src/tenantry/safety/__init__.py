"""What judges and limits agents: policy, budgets, the kill switch, the guard, the audit
chain and the sandbox, one package each."""
