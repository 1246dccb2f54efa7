"""The record protocol as a Promela model (protocol.pml), its mutants, and the runner
that checks them with SPIN (check.py: ``python3 -m model.check``)."""
