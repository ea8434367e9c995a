"""The facts the ledger tests plant before the first compaction (unit tests, real Claude Code, real pi): a goal,
a path, a validation command, a hard constraint, and an error stated in one user sentence."""

GOAL = "Build the zeta config loader in loader.py and keep its tests green."
PATH = "The deploy manifest lives at deploy/zeta/manifest.toml."
VALIDATE = "Validate every step with `make verify-zeta` before you report it done."
NEVER = "Never push to the release branch."
PLANTED = f"{PATH} {VALIDATE} {NEVER}"
ERROR = "The last CI run failed with ERR_ZETA_4711 from the config loader."
FACTS = ("deploy/zeta/manifest.toml", "make verify-zeta", NEVER, "ERR_ZETA_4711")
"""What must reach the model after every compaction (the error as its code)."""
