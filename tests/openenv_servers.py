"""OpenEnv servers for the OpenEnv tests, each a real openenv-core server on loopback.

`python tests/openenv_servers.py MODE PORT`:

- `dipg`: the published DIPG safety env (openenv-dipg-safety, from .venv/openenv-envs) with its own
  environment factory, served with 8 sessions. Its own app module serves one session at a time and
  its environment does not declare concurrent sessions, though its factory builds one environment per
  session (so GRPO's G episodes, each a session, can run): this launcher declares it.
- `slow`: a one-step text env whose step takes 60 seconds.
- `malformed`: a text env whose observations carry `messages` that are not chat messages.
- `die`: a text env whose step ends the server process (a crash mid-episode).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import uvicorn
from openenv.core.env_server import Action, ConcurrencyConfig, Environment, Observation, State, create_app


class TextAction(Action):
    text: str


class TextObservation(Observation):
    prompt: str = ""
    messages: list[Any] | None = None


class TextEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    mode = "slow"

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> TextObservation:
        self._state = State(episode_id=episode_id)
        if self.mode == "malformed":
            return TextObservation(prompt="hi", messages=[{"role": "narrator", "content": 7}])
        return TextObservation(prompt=f"Say something (seed {seed}).")

    def step(self, action: TextAction, timeout_s: float | None = None, **_: Any) -> TextObservation:
        if self.mode == "die":
            os._exit(1)
        if self.mode == "slow":
            time.sleep(60)
        return TextObservation(prompt="", done=True, reward=1.0)

    @property
    def state(self) -> State:
        return self._state


def app_for(mode: str):
    config = ConcurrencyConfig(max_concurrent_envs=8)
    if mode == "dipg":
        from med_safety_gym import app as dipg
        from med_safety_gym.dipg_environment import DIPGEnvironment
        from med_safety_gym.models import DIPGAction, DIPGObservation

        DIPGEnvironment.SUPPORTS_CONCURRENT_SESSIONS = True
        return create_app(dipg.get_environment, DIPGAction, DIPGObservation, concurrency_config=config)
    TextEnv.mode = mode
    return create_app(TextEnv, TextAction, TextObservation, concurrency_config=config)


if __name__ == "__main__":
    uvicorn.run(app_for(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
