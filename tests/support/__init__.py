"""What the tests share, and only that: no test module imports another test module or a
conftest; whatever two of them need lives here, fixtures stay in the conftest files.

- :mod:`.services`: which services the run has (PostgreSQL, Redis, the Celery broker),
  skipping or failing a test without one.
- :mod:`.storms`: threads released together (``run_threads``), storms of duplicate
  requests (``storm``, ``Storm``), waiting on a condition.
- :mod:`.counting`: a thread-safe execution counter.
- :mod:`.stores`: the store and mode variants tests are parametrised over.
- :mod:`.users`: users, token clients, the sample's keyed API client.
- :mod:`.http`: one keyed JSON ``POST``.
- :mod:`.records`: idempotency records made directly in the table.
- :mod:`.workers`: real Celery worker processes.
- :mod:`.faults`, :mod:`.proxy`, :mod:`.chromium`: private Redis servers, a lossy network,
  a real browser.
- :mod:`.factories`, :mod:`.naive`, :mod:`.problems`, :mod:`.strategies`: the sample's
  factories, its naive service doubles, problem+json assertions, Hypothesis strategies.
- :mod:`.imports`: the repository's import graph, for the layout tests.
"""
