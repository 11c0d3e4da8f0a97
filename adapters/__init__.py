"""The ports' implementations, chosen by URL: the SQL store, the run queue and the signal bus."""
