"""Where an engine runs: a worker process (`pool`, `worker`, `channel`, `messages`) or this
process, behind one interface for the runner (`engines`), with what it prints kept for
its case (`capture`)."""
