"""Runs put beside other runs: a live run against simulated ones (`sim.compare`), the popular
queues' recovery settings against each other (`sim.compare_peers`), and the two-sample tests."""
