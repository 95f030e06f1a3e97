"""One module per ``soak`` subcommand; each defines ``register(subparsers)``."""
