"""When the daemon does what: the deadlines of its loop, on the monotonic clock. Pure: every
method takes ``now``, so a test drives it through hours or a suspend with plain numbers."""

from __future__ import annotations

POLICY_EVERY = 600.0  # seconds between policy runs (also after a config change or a new max)
PRUNE_EVERY = 3600.0
PRUNE_AGAIN = 1.0  # while a prune left rows to delete
RECOMMENDED_EVERY = 3600.0  # re-ask (cheap when cached; re-probes after an OS update)
CONFIG_BACKSTOP = 600.0  # config.toml re-checked this often, in case the watch missed an edit
DEBOUNCE = 0.2


class Schedule:
    """The loop's deadlines (monotonic seconds) and what is pending."""

    def __init__(self, interval: float, now: float) -> None:
        self.interval = interval
        self.next_tick = now
        self.next_check = now + CONFIG_BACKSTOP
        self.next_prune = now
        self.next_probe: float | None = None
        self.probing = False
        self.reload_at: float | None = None
        self.last_eval: float | None = None
        self.pending = True  # the policy should run (as soon as there is a recommended max)
        self.retry_at = now

    def timeout(self, now: float) -> float:
        """How long the loop may wait for an event before something is due."""
        deadlines = [self.next_tick, self.next_check]
        if self.reload_at is not None:
            deadlines.append(self.reload_at)
        return max(0.0, min(deadlines) - now)

    # -- events ------------------------------------------------------------------------------
    def config_touched(self, now: float) -> None:
        """config.toml changed: re-read it after ``DEBOUNCE`` (an editor's writes are one)."""
        if self.reload_at is None:
            self.reload_at = now + DEBOUNCE

    def reload_requested(self, now: float) -> None:
        """SIGHUP: re-read config.toml at once."""
        self.reload_at = now

    def run_policy(self, now: float) -> None:
        """A new recommended max, or the wall clock moved (the hours term moved on): run now."""
        self.pending, self.retry_at = True, now

    def probe_finished(self) -> None:
        self.probing = False

    # -- config.toml ---------------------------------------------------------------------------
    def reload_due(self, now: float) -> bool:
        """Whether to re-read config.toml now (a debounced event, a SIGHUP or the backstop)."""
        asked = self.reload_at is not None and now >= self.reload_at
        if asked:
            self.reload_at = None
        if not asked and now < self.next_check:
            return False
        self.next_check = now + CONFIG_BACKSTOP
        return True

    def config_changed(self, interval: float, last_tick: float | None, now: float) -> None:
        """The config changed: run the policy; a shorter interval counts from the last tick."""
        self.interval = interval
        self.pending, self.retry_at = True, now
        self.next_tick = min(self.next_tick, (now if last_tick is None else last_tick) + interval)

    # -- ticks ------------------------------------------------------------------------------
    def tick_due(self, now: float) -> bool:
        return now >= self.next_tick

    def ticked(self, now: float) -> None:
        """A tick was taken at ``now``: plan the next one, and the policy when it is time."""
        planned = self.next_tick + self.interval
        # Behind (slept, a slow sample: no burst) or too far ahead: one interval from now.
        self.next_tick = planned if now < planned <= now + self.interval else now + self.interval
        if self.last_eval is None or now - self.last_eval >= POLICY_EVERY:
            self.pending = True

    # -- the recommended max ---------------------------------------------------------------------
    def probe_due(self, now: float) -> bool:
        return self.next_probe is not None and now >= self.next_probe and not self.probing

    def probe_started(self, now: float) -> None:
        self.probing = True
        self.next_probe = now + RECOMMENDED_EVERY

    # -- the history ------------------------------------------------------------------------------
    def prune_due(self, now: float) -> bool:
        return now >= self.next_prune

    def pruned(self, now: float, more: bool) -> None:
        self.next_prune = now + (PRUNE_AGAIN if more else PRUNE_EVERY)

    # -- the policy ----------------------------------------------------------------------------
    def evaluate_due(self, now: float, have_max: bool) -> bool:
        """Whether to run the policy now (``have_max``: the recommended max is known)."""
        return self.pending and have_max and now >= self.retry_at

    def evaluated(self, now: float, ok: bool) -> None:
        """The policy ran; when it could not update limits.toml, the next try waits for the
        next tick: what could fix it is time or a config change."""
        self.last_eval = now
        self.pending = not ok
        if not ok:
            self.retry_at = self.next_tick
