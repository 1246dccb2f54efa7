"""The errors of keyed function and task calls (``@idempotent_function``,
``IdempotentTask``, ``@idempotent_django_task``): a call in progress (or deferred), a key
with an empty part, a key reused by another callable or with other arguments, an error
replayed without its type."""

from __future__ import annotations

from idempotency.exceptions.requests import IdempotencyKeyMismatch


def _ref(scope: str, key: str) -> str:
    """A record as messages name it (``scope_hash/key_hash``): exception messages end up
    in logs (Celery's, the caller's), which never carry raw keys or scopes."""
    from idempotency.utils.hashing import log_ref

    return log_ref(scope, key)


class RecordError(Exception):
    """An error about one record, made of its raw ``scope`` and ``key`` (kept as
    attributes) and a message that names the record by their keyed hashes only
    (:attr:`template`'s ``{ref}``): Celery, callers and Django's error log print it."""

    template = "The idempotency record {ref}"

    def __init__(self, scope: str, key: str) -> None:
        super().__init__(self.template.format(ref=_ref(scope, key)))
        self.scope = scope
        self.key = key

    def __reduce__(self) -> tuple[type[RecordError], tuple[str, str]]:
        return (type(self), (self.scope, self.key))


class InProgress(RecordError):
    """A non-HTTP idempotent call (function, task) is already running under this key."""

    template = "Idempotent call {ref} is already in progress"


class TaskDeferred(InProgress):
    """A Django task's run (``@idempotent_django_task``) found its key in progress
    elsewhere and enqueued itself again to run later (``run_after``): this run did
    nothing, the copy whose result id is ``deferred_id`` answers instead (``run_after``:
    when it may start, ISO 8601)."""

    def __init__(self, scope: str, key: str, deferred_id: str, run_after: str) -> None:
        super().__init__(scope, key)
        self.args = (
            f"Idempotent call {_ref(scope, key)} is already in progress: deferred as task "
            f"result {deferred_id}, to run after {run_after}",
        )
        self.deferred_id = deferred_id
        self.run_after = run_after

    def __reduce__(self) -> tuple[type[InProgress], tuple[str, ...]]:  # type: ignore[override]  # four arguments, not two
        return (TaskDeferred, (self.scope, self.key, self.deferred_id, self.run_after))


class IdempotencyKeyMissing(ValueError):
    """A function's or task's key has a part that is None or empty (``"pay:{trade_no}"``
    called with ``trade_no=None``, ``""``, ``[]``, ``{}``): no key is built from it, since
    every such call would share one. ``optional=True`` runs the call without
    idempotency instead (and logs a warning)."""


class StoredError(Exception):
    """The replay of an exception stored with ``store_errors=True`` whose type could not
    be rebuilt from its arguments: it carries the type's dotted name and the message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message

    def __reduce__(self) -> tuple[type[StoredError], tuple[str, str]]:
        return (type(self), (self.type_name, self.message))


class FunctionKeyMismatch(IdempotencyKeyMismatch, ValueError):
    """The key is live for a *different* function (or Celery task) in the same scope.

    Two callables share a key only by mistake (a key template too broad, such as
    ``"{order_id}"`` used by both "pay" and "refund"): instead of returning the
    other callable's result, the call fails. Make the key name its purpose
    (``"pay:{order_id}"``) or give each callable its own ``scope``.

    It is a :class:`ValueError` (the key argument is wrong) and an
    :class:`~idempotency.exceptions.IdempotencyKeyMismatch`, so code that already
    catches the HTTP layer's mismatch catches this one too (DRF renders it 422).
    """

    default_code = "idempotency-key-reused-by-another-function"
    title = "Idempotency key reused by another function"

    def __init__(self, scope: str, key: str, name: str) -> None:
        super().__init__(
            f"Idempotency key {_ref(scope, key)} is already used by another "
            f"function or task than {name}; give each one keys of its own."
        )
        self.scope = scope
        self.key = key
        self.name = name

    def __reduce__(self) -> tuple[type[FunctionKeyMismatch], tuple[str, str, str]]:
        return (type(self), (self.scope, self.key, self.name))


class ArgumentsMismatch(IdempotencyKeyMismatch, ValueError):
    """The key is live for the same function or task called with *other arguments*.

    The HTTP layer's 422 for functions: a retry must repeat the call, and a call with
    other arguments under the same key is a different call (a key template that leaves
    out something that matters, or a tampered payload). ``fingerprint=`` narrows which
    arguments count, or turns the check off.
    """

    default_code = "idempotency-key-reused-with-other-arguments"
    title = "Idempotency key reused with other arguments"

    def __init__(self, scope: str, key: str, name: str) -> None:
        super().__init__(
            f"Idempotency key {_ref(scope, key)} was used by {name} with other "
            "arguments; a repeat must pass the same ones (see fingerprint=)."
        )
        self.scope = scope
        self.key = key
        self.name = name

    def __reduce__(self) -> tuple[type[ArgumentsMismatch], tuple[str, str, str]]:
        return (type(self), (self.scope, self.key, self.name))
