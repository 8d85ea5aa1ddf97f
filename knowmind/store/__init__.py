"""SQL for every table. Each function takes an open connection; callers own the transaction.

Tenant-owned statements name ``tenant_id`` explicitly even though row-level security filters
them too: the explicit predicate lets the planner use the tenant-leading indexes, and the policy
underneath guarantees isolation even if a statement forgot it.
"""
