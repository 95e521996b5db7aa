"""The command line (`python -m sim COMMAND`, `leaselab`): main parses and dispatches; messages,
run_text, overrides and hunt_command are what it prints, reads and runs. It parses and prints;
the library checks, runs and writes files."""
