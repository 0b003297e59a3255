"""Playing episodes: one loop for training, held-out evaluation, `rlvr eval` and `rlvr eval --endpoint`.

Read in this order:

- `loop.py`: how one turn is played (`rollout`: reset, render, ask the session for turns, step the
  env, append its reply, score), and `local_rollout` for the trainer's prompts;
- `sessions.py`: what the loop asks of a generator (`Session`, `BatchSession`, `TurnByTurn`) and the
  records it passes (`SamplingSettings`, `Batch`, `Turn`, `Sampled`);
- `local.py` and `sampler.py`: the local generator and its KV-cache sampler (torch);
- `registry.py`: the generators by name (`local`, `vllm`);
- `chat.py`: chat rendering and the env's reply as tokens;
- `envs.py`: what the loop asks of an env (multi-turn, stop marker, scoring);
- `groups.py`: the `Group` of a prompt's episodes, seeds, infrastructure errors;
- `tally.py`: what training and evaluation report about played episodes.

The package imports nothing itself: import the module you need.
"""
