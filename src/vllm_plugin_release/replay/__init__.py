"""Scheduler replay and the live mixed-load test: request mixes, the replay's config, cost
model and metrics on this side; the schedulers stepped in the pairing environment."""
