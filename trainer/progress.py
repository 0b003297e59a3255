"""The progress bar of `rlvr train`, drawn against the limit that ends the run.

A run stops at `steps` or when `max_minutes` of training time are spent, whichever comes first;
`make run` sets `steps=1000` only as a bound and lets its 11 minutes end it. Counting toward the
bound would show a run at 5% and hours from its end when its budget ends it minutes later. So the
bar shows the share done of the further-along limit (as the learning-rate schedule does) and the
training time left until that limit.
"""

from __future__ import annotations


def estimate(step: int, steps: int, train_s: float, budget_s: float,
             s_per_step: float | None) -> tuple[float, float | None]:
    """(share of the run done, seconds of training left: None before a step time is known).

    `budget_s` is 0 without a time budget; `s_per_step` is the mean training time of a step."""
    by_steps = min(1.0, step / steps) if steps else 1.0
    by_time = min(1.0, train_s / budget_s) if budget_s > 0 else 0.0
    budget_left = max(0.0, budget_s - train_s)
    if budget_s > 0 and by_time >= by_steps:
        return by_time, budget_left
    left = None if s_per_step is None else (steps - step) * s_per_step
    if budget_s > 0 and left is not None:
        left = min(left, budget_left)
    return by_steps, left


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, s = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{s:02d}" if hours else f"{minutes}:{s:02d}"


class ProgressBar:
    """A tqdm bar of the run's share done, with the step, the budget spent and the time left."""

    def __init__(self, steps: int, max_minutes: float, step: int, train_s: float):
        from tqdm import tqdm

        self.steps, self.budget_s = steps, 60 * max_minutes
        self.start = (step, train_s)  # a resumed run's mean step time counts this session's steps only
        # the text after the bar is set as the description: tqdm puts ", " before a postfix
        self.bar = tqdm(total=1.0, dynamic_ncols=True, bar_format="grpo {percentage:3.0f}%|{bar}| {desc}")
        self.update(step, train_s)

    def update(self, step: int, train_s: float, **metrics: str) -> None:
        first_step, first_s = self.start
        s_per_step = (train_s - first_s) / (step - first_step) if step > first_step else None
        done, left = estimate(step, self.steps, train_s, self.budget_s, s_per_step)
        parts = [f"step {step}/{self.steps}"]
        if self.budget_s > 0:
            parts.append(f"{clock(train_s)} of {clock(self.budget_s)} budget")
        parts.append(f"{clock(left)} left")
        parts += [f"{key}={value}" for key, value in metrics.items()]
        self.bar.n = done
        self.bar.set_description_str(", ".join(parts))  # redraws the bar

    def close(self) -> None:
        self.bar.close()
