"""A FastAPI app that stores an order and enqueues its receipt in one transaction."""
