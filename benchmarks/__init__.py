"""Performance benchmarks (not tests), run from the repository root as modules.

``python -m benchmarks.projection``, ``python -m benchmarks.boot`` and
``python -m benchmarks.activation``: as a package they import ``backend``, ``tests.e2e`` and each
other's shared modules (``dataset``, ``reference``, ``databases``, ``timing``) without editing
``sys.path``. See ``benchmarks/README.md``.
"""
