# The batch reader's reads in C (_chunked.c; llmload/client/chunked_reader.py)

MORE: int
END: int
EOF_: int
AGAIN: int
BAD: int
FOREIGN: int

class Decoder:
    """The state of one body's HTTP/1.1 chunked framing, from its first size line."""

    @property
    def ended(self) -> bool: ...
    def feed(self, data: bytes, /) -> tuple[bytes, int]: ...

def poll(
    epfd: int, decoders: dict[int, Decoder], bufsize: int, /
) -> list[tuple[int, float, float, bytes, int]]: ...
