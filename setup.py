"""The one part of llmload built from C: the batch reader's reads (llmload/client/chunked_reader.py).

Optional: without a C compiler and Python's headers the install goes on and the reads stay in Python
(scripts/system-deps.sh installs both; in CI a missing build fails tests/test_chunked_reader.py).
Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("llmload.client._chunked", ["llmload/client/_chunked.c"], optional=True)])
