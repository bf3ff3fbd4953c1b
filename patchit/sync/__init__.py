"""patchit.sync."""
