"""The simulated LLM serving engine: a standalone process (``python -m llmload.sim``).

Public surface: the profile API (``list_profiles``, ``load_profile``, ``validate_profile``,
``SimProfile``, ``ProfileError``), ``SimProcess`` to run one as a subprocess, and ``cli.main``.
"""

from llmload.sim.process import SimProcess, SimStartError
from llmload.sim.profiles import ProfileError, SimProfile, list_profiles, load_profile, validate_profile

__all__ = [
    "ProfileError",
    "SimProcess",
    "SimProfile",
    "SimStartError",
    "list_profiles",
    "load_profile",
    "validate_profile",
]
