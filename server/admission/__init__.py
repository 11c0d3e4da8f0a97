"""What a caller may take: rates, quotas, stream slots and log limits."""
