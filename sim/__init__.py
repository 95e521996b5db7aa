"""Lease Lab: simulate database-backed job queues that hand out work by leases."""

__version__ = "0.1.0"
