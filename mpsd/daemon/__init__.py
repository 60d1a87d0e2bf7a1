"""The daemon: the loop and its schedule, the config watch, the history store, the policy (pure)."""
