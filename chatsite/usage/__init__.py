"""Token usage: what a tenant's runs consumed, read from the runs themselves."""
