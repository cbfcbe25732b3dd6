"""llmload: load-test LLM serving engines under the same streaming traffic."""

__version__ = "0.1.0"
