"""What a python gets where: the decision, opt-in, ``apply()``, ``budget()``."""
