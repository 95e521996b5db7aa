"""`python -m sim` leaves without a last garbage collection over the objects pandas and scipy made
(issue 37: 0.2-0.4 s after the last line), and still exits with the command's code."""

from __future__ import annotations

import gc

from sim import __main__ as entry


def test_the_command_returns_its_code_with_the_objects_frozen(capsys):
    try:
        assert entry.main(["list"]) == 0
        assert gc.get_freeze_count() > 0
        assert entry.main(["show", "no-such-scenario"]) == 2
    finally:
        gc.unfreeze()
    assert "baseline" in capsys.readouterr().out
