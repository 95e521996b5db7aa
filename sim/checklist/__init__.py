"""The design review (`sim.review`, `python -m sim review`): the checklist items measured on runs,
the processing times they read, the review itself and its HTML report."""
