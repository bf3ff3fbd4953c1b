"""patchit.sandbox."""
