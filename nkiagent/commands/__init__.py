"""One module per CLI subcommand; each exposes ``run_<name>(args) -> exit code``."""
