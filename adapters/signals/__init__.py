"""Signals between processes: cancel routing between server replicas, and the executors' fallback channel
(cancel keys, heartbeats) for when their stream is down. Redis, or in-process."""
