"""Clarification requests: creation, live waiters, detachment and expiry.

Which bundle is *active* is decided by :mod:`backend.authority`; this package only writes, and
every write is a single conditional statement so concurrent answers, newer turns and repeated
passes cannot overwrite each other.
"""
