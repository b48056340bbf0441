"""Subcommands of the gpulab CLI, one module each, imported on demand."""
