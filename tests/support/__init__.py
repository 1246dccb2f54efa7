"""What the tests share, and only that: no test module imports another test module or a
conftest; whatever two of them need lives here, fixtures stay in the conftest files.

- :mod:`.services`: which services the run has (PostgreSQL, Redis, the Celery broker),
  skipping or failing a test without one.
- :mod:`.storms`: threads released together (``run_threads``), storms of duplicate
  requests (``storm``, ``Storm``), waiting on a condition.
- :mod:`.clocks`: time passing for a store's record, without a sleep.
- :mod:`.counting`: a thread-safe execution counter, unique names.
- :mod:`.stores`: the store and mode variants tests are parametrised over.
- :mod:`.users`, :mod:`.http`: users, token and keyed API clients, one keyed JSON ``POST``.
- :mod:`.records`: idempotency records made directly in the table.
- :mod:`.tasks`, :mod:`.workers`: in-process Celery apps, real Celery worker processes.
- :mod:`.servers`, :mod:`.processes`, :mod:`.clusters`: a uvicorn server, stopping process
  groups, a private Redis Cluster and its caches.
- :mod:`.faults`, :mod:`.proxy`, :mod:`.browser`: private Redis servers, a lossy network,
  a real browser (pytest-playwright's ``page`` on Debian's Chromium).
- :mod:`.keepalive_owner`, :mod:`.lock_worker`: processes the keep-alive and lock tests run;
  :mod:`.locks`: holdings of a database lock backend taken directly.
- :mod:`.uploads`: multipart bodies of any size.
- :mod:`.factories`, :mod:`.naive`, :mod:`.gateway`, :mod:`.problems`, :mod:`.strategies`:
  the sample's factories, its naive service doubles, its payment gateway, problem+json
  assertions, Hypothesis strategies.
- :mod:`.imports`: the repository's import graph, for the layout tests.
"""
