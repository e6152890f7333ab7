"""Orders, and the receipt job that each one enqueues."""
