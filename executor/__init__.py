"""The executor: worker processes that take runs from the queue, claim them over their stream to the server,
run them (commands, webhooks, registered Python handlers) and report heartbeats, logs, progress and results.

`Executor` in `jobmesh.executor.runtime` runs one (`jobmesh executor` starts it as a process);
`HandlerRegistry` and `HandlerContext` in `jobmesh.executor.handlers` serve Python handlers.
"""
