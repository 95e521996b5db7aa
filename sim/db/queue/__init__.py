"""A user's own queue (`--sql DIR`): its directory and files, its settings (queue.toml), the
contract its statements must keep, the checks before a run (user_sql, preflight), the sandbox
role it runs in, what its statements cost (guard) and do (probes, sql_findings), and the adapter
between the model's job ids and the queue's."""
