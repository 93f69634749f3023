package hostgate

// PLACEHOLDER: replaced by the provider work (issue 3) within this session.
func ExecProvider(t Transport) Provider { return nil }
