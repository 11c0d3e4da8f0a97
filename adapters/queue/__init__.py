"""The run queue: how due runs travel from the server and watcher to the executors (Kafka, or in-process)."""
