"""The machine: one memory sample from the OS, the PyTorch jobs running, the recommended max."""
