"""patchit.intake."""
