"""The health of the chain: one read model (``chain``) and one list of findings judged from it
(``findings``; ``system`` adds what only ``doctor`` reads: the launchd agent, the rc files,
torch). ``status`` shows each finding's short form, ``doctor`` its detail and fix."""
