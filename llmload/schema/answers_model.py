"""What reasoning models and shaped answers add to a target's block in summary.json (docs/metrics.md):
the reasoning/answer split of the output tokens, and the answers judged against the JSON or tool call
they asked for. Each is present only when the window had some, so a classic run's summary is unchanged."""

from __future__ import annotations

from llmload.schema.results_lines import LenientModel


class ReasoningTokens(LenientModel):
    """Reasoning models (docs/metrics.md): output tokens split into reasoning and answer."""

    requests: int  # requests that streamed reasoning
    reasoning: int  # the server's completion_tokens_details.reasoning_tokens, else reasoning chunks
    answer: int  # those requests' output tokens less their reasoning tokens
    reasoning_approx: bool  # some reasoning counts came from chunk kinds, not the server's usage


class Answers(LenientModel):
    """Shaped answers (docs/metrics.md): those judged against the JSON or tool call they asked for."""

    checked: int  # answers judged (the request asked for JSON or offered tools)
    valid: int  # of which usable: they parsed and fit the schema; the rest are invalid_output or failed
    tool_calls: int  # tool calls streamed
    sessions: Sessions | None = None  # agent loops only


class Sessions(LenientModel):
    """Agent loops (workload ``agent``, llmload/locust/sessions.py): sessions, their turns and ends."""

    sessions: int  # sessions started (their first turns)
    turns: int  # every turn, the first included
    answered: int  # sessions whose last turn answered without a call
    rounds: int  # sessions that still called a tool on their last allowed turn
    failed: int  # sessions that ended on a failed turn
    tool_wait_s: float  # time in the tool between turns (in no latency figure)
