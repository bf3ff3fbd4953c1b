"""Delivery: a verified fix leaves the machine as a pull request (`patchit pr ID`)."""
