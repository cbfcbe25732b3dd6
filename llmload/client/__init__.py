"""The stream client: the OpenAI request, the SSE parser, the kernel-stamped transport, the capacity self-test."""
