"""The engine both front ends (``fastload.compat.dali``, ``fastload.compat.rocal``) share and neither owns:
the traced graph and its per-sample run (``graph``), what a reader node gives (``readers``) and COCO
instances files (``coco``). Nothing here imports a front end."""
