"""Subcommands of the gpulab CLI, imported on demand.

cli.COMMANDS maps each command to its module (check.py serves `check` and
`watch`, course.py the course commands), which defines `run(args) -> int`;
their options are declared in gpulab.cli.options, so `gpulab --help`
imports none of these modules."""
