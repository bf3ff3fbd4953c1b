"""Classification of a failure from error signatures."""
