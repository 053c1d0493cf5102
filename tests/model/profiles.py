"""Hypothesis profiles of the model test (registered from ``tests/conftest.py`` so that
``--hypothesis-profile=long`` can load them at start-up).

- ``model-ci`` (used unless another model profile is loaded): a bounded run for CI.
- ``model-shrink``: like ``model-ci`` but shrinks a failure to a minimal program.
- ``long``: thousands of programs (and shrinking), for a soak run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

MODEL_PROFILES = ("model-ci", "model-shrink", "long")
_COMMON = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
    "print_blob": True,
    "report_multiple_bugs": True,
}
#: CI does not shrink (a failing program is printed in full, step by step, and saved in the
#: example database, so the next run replays it first); ``long`` shrinks to a minimal program.
settings.register_profile(
    "model-ci",
    max_examples=30,
    stateful_step_count=16,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    **_COMMON,
)
settings.register_profile("model-shrink", max_examples=200, stateful_step_count=16, **_COMMON)
settings.register_profile("long", max_examples=2000, stateful_step_count=24, **_COMMON)


def model_settings() -> settings:
    """The loaded profile if it is one of ours, else ``model-ci``."""
    name = settings.get_current_profile_name()
    return settings.get_profile(name if name in MODEL_PROFILES else "model-ci")
