"""The Textual TUI. Imported only by `gpulab` (no command) and `gpulab serve`;
the core never imports it (an import-linter contract in pyproject says so)."""
