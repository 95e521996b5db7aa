"""What a run plays: the settings (Workload + Policy + Faults, validated, TOML in and out), the
presets (presets/*.toml), distributions, observed durations, the limits and pinned schedules.

    from sim.scenario import Scenario, preset
"""

from sim.scenario.settings import (
    Faults,
    LeaseWarning,
    Policy,
    Scenario,
    Workload,
    dumps,
    from_dict,
    load,
    loads,
    preset,
    preset_names,
    resolve,
    save,
    to_dict,
)

__all__ = [
    "Faults",
    "LeaseWarning",
    "Policy",
    "Scenario",
    "Workload",
    "dumps",
    "from_dict",
    "load",
    "loads",
    "preset",
    "preset_names",
    "resolve",
    "save",
    "to_dict",
]
