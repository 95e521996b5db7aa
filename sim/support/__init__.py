"""Helpers every floor uses: numbers in words, output paths checked before a run, files the user
names, progress bars, seeded random streams, and SIGTERM handled like Ctrl-C."""
