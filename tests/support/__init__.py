"""Helpers the test modules share; fixtures stay in ``tests/conftest.py``.

A test module imports from here, never from another test module (``tests/test_suite_layout.py`` checks it).
"""
