"""The loop fixtures (a real failing script in a real git repo, a memory) for delivery tests."""

from tests.test_loop_fast import event, memory

__all__ = ["event", "memory"]
