"""Who calls: TLS, client certificates and tokens, roles, and the audit of refused calls."""
