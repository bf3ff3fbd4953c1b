"""patchit.loop: the closed loop and its running state.

`loop.heal()` is the design's steps in order. `search` proposes, pre-checks and verifies,
`trial` runs one candidate and lands the winner, `change_groups` makes one incident of the
failures one change broke, `recurrence` tells whether a later failure is still the same one,
`context` builds what a heal needs (state dir, memory, config, plugins), `recovery` clears what
runs that died left behind, `inspection` re-runs a landed fix (`patchit inspect`), and `faults`
names the points where the fault run may kill a heal. Nothing in the stage packages imports
this package; the CLI, the worker and the Airflow heal task do.
"""
