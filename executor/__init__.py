"""The executor: worker processes that take runs from the queue, claim them over their stream to the server,
run them (commands, webhooks, registered Python handlers) and report heartbeats, logs, progress and results.

Entry points: `jobmesh.executor.main.run_executor(config, handlers)` for a process, `Executor` in
`jobmesh.executor.runtime` to embed one, `HandlerRegistry` / `HandlerContext` in `jobmesh.executor.handlers`.
"""
