"""patchit.reports."""
