import pytest

# The shared helpers assert too: rewrite their asserts as pytest does a test module's.
pytest.register_assert_rewrite("tests.support")
