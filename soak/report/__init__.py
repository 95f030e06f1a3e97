"""report."""

APP_DB_ENV = "SOAK_REPORT_DB"
"""The store URL the app reads (``soak report serve --db``): in its environment, never its argv,
which ``ps`` shows every user of the host."""
