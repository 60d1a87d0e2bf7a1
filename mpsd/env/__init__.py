"""What a python gets where: the exports decision, opt-in (and enable's first estimate),
``apply()``, ``budget()``."""
