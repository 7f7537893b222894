package codex

// decide is the v1 answer: approve or deny.
func decide(approve bool) Answer {
	if approve {
		return Answer{Decision: DecisionApprove}
	}
	return Answer{Decision: DecisionDeny}
}
