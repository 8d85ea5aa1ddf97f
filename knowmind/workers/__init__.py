"""Background workers: the job worker (extraction) and the graph-mirror drainer. Both run
inside the server, or alone with ``knowmind worker``."""
