"""Reading a request: whether it takes part, its key, and the job of one that does.

A request takes part when its method is unsafe and it carries an ``Idempotency-Key``
(or its view requires one). :func:`prepare` parses the key (:func:`parse_key`), finds
the caller's scope (after authentication: DRF's ``initial()``, Ninja's auth) and the
request's fingerprint, and resolves the view's options into a
:class:`~idempotency.core.job.Job` for the engine. A view sees its own key as
``request.idempotency`` (:class:`IdempotencyContext`).

Recovery points (lease mode, after Brandur Leach's atomic phases). A view that calls out
to the world in several steps records each committed step; when it fails or its worker
dies, the retry with the same key starts with the last recorded step and resumes after
it instead of repeating it::

    @idempotent(mode="lease")
    def checkout(request):
        point, data = get_recovery_point(request)
        if point == "":
            charge = gateway.charge(...)
            recovery_point(request, "charged", {"charge_id": charge.id})
            point, data = "charged", {"charge_id": charge.id}
        if point == "charged":
            ship(data["charge_id"])
        ...

The key. The draft (draft-ietf-httpapi-idempotency-key-header) makes the header an
RFC 8941 Item whose value is a String: ``"abc"``. Two syntaxes, chosen by ``KEY_SYNTAX``:

* ``"lenient"`` (the default): an sf-string or a bare value (``abc``), so clients that
  send the key unquoted (most do) keep working. Parameters (``;name=value`` after the
  key) are refused in both forms alike: the draft defines none, and a bare key that
  contained ``;a=1`` could not be told from a key with a parameter. A key that
  contains ``;`` is sent quoted.
* ``"strict"``: exactly the draft: only an sf-string, parsed as an RFC 8941 Item, so
  its parameters are accepted when well-formed and are no part of the key.

Either way the key is 1 to 255 printable ASCII characters, and more than one header
(which servers fold into one, comma-joined) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase

from idempotency import signals
from idempotency.conf import MAX_KEY_LENGTH, idempotency_settings
from idempotency.core.job import Job
from idempotency.exceptions import (
    AnonymousNotAllowed,
    ImproperlyApplied,
    KeyInvalid,
    KeyRequired,
    StaleOwner,
    problem_response,
)
from idempotency.http.options import Policy, resolve
from idempotency.scopes import aload_user
from idempotency.stores.base import BaseStore
from idempotency.stores.records import record_digest

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: RFC 8941 parameters after an Item: ``;key[=bare-item]``, repeated.
_BARE_ITEM = (
    r'(?:-?\d{1,12}\.\d{1,3}|-?\d{1,15}|"(?:[^"\\]|\\["\\])*"'
    r"|[A-Za-z*][!#$%&'*+\-.^_`|~:/0-9A-Za-z]*|:[A-Za-z0-9+/=]*:|\?[01])"
)
_PARAMETERS = re.compile(rf"(?:;[ ]*[a-z*][a-z0-9_\-.*]*(?:={_BARE_ITEM})?)*")


def _unquote(value: str, *, strict: bool) -> str:
    """The content of an sf-string: ``"..."`` with ``\\"`` and ``\\\\`` escapes, and
    what follows it checked (parameters: refused, or in strict mode RFC 8941's)."""
    chars: list[str] = []
    i = 1
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in '"\\':
                raise KeyInvalid("The quoted Idempotency-Key has an invalid escape.")
            chars.append(value[i + 1])
            i += 2
            continue
        if ch == '"':
            _check_rest(value[i + 1 :], strict=strict)
            return "".join(chars)
        chars.append(ch)
        i += 1
    raise KeyInvalid("The quoted Idempotency-Key is not terminated.")


def _check_rest(rest: str, *, strict: bool) -> None:
    """What follows the closing quote: nothing, or (strict) RFC 8941 parameters."""
    rest = rest.rstrip(" \t")
    if not rest or (strict and _PARAMETERS.fullmatch(rest)):
        return  # strict: an Item's well-formed parameters, no part of the key
    if "," in rest if strict else rest.lstrip(" \t").startswith(","):
        raise KeyInvalid("Send exactly one Idempotency-Key header.")
    raise KeyInvalid(
        "The Idempotency-Key must be one RFC 8941 string, with well-formed parameters."
        if strict
        else "The Idempotency-Key must be a single string, without parameters."
    )


def parse_key(raw: str | None, *, strict: bool | None = None) -> str | None:
    """The key carried by a header value, None when absent; raises on a malformed value.

    ``strict`` (default: ``KEY_SYNTAX == "strict"``) accepts only RFC 8941 sf-strings.
    """
    if raw is None:
        return None
    if strict is None:
        strict = idempotency_settings.KEY_SYNTAX == "strict"
    value = raw.strip(" \t")
    if not (value.isascii() and value.isprintable()):  # 0x20-0x7E
        raise KeyInvalid("The Idempotency-Key must be printable ASCII.")
    if value.startswith('"'):
        key = _unquote(value, strict=strict)
    elif strict:
        raise KeyInvalid('The Idempotency-Key must be an RFC 8941 string: quote it, as in "abc".')
    else:
        if "," in value:
            raise KeyInvalid("Send exactly one Idempotency-Key header.")
        if '"' in value or "\\" in value:
            raise KeyInvalid("The Idempotency-Key has stray quotes or backslashes.")
        if ";" in value:
            raise KeyInvalid(
                "The Idempotency-Key must be a single string, without parameters "
                '(quote a key that contains ";", as in "a;b").'
            )
        key = value
    if not key:
        raise KeyInvalid("The Idempotency-Key is empty.")
    if len(key) > MAX_KEY_LENGTH:
        raise KeyInvalid(f"The Idempotency-Key is longer than {MAX_KEY_LENGTH} characters.")
    return key


#: Header name -> its WSGI ``META`` name (``Idempotency-Key`` -> ``HTTP_IDEMPOTENCY_KEY``).
_META_NAMES: dict[str, str] = {}


def header_value(request: HttpRequest, header: str) -> str | None:
    """The raw value of ``header`` (WSGI/ASGI servers fold repeats into one, comma-joined)."""
    meta_name = _META_NAMES.get(header)
    if meta_name is None:
        meta_name = _META_NAMES[header] = "HTTP_" + header.upper().replace("-", "_")
    value = request.META.get(meta_name)
    if value is None:
        return None
    if isinstance(value, bytes):  # pragma: no cover - defensive: some servers pass bytes
        value = value.decode("latin-1")
    return str(value)


@dataclass
class IdempotencyContext:
    """What a view can see of its key: ``request.idempotency``.

    In lease mode a view with multi-step work records committed phases with
    :meth:`save_recovery_point`; a retry after a crash or an error starts with
    :attr:`recovery_point` set to the last one and resumes from there.
    """

    scope: str
    key: str
    fingerprint: str
    mode: str
    store: BaseStore
    fence: int = 0
    recovery_point: str = ""
    recovery_data: Any = None
    #: Lease mode: this attempt took the key over from an owner whose lease ran out. That
    #: owner may have crashed *after* its effect and before its record (an effect in the
    #: application's database cannot commit with a record in Redis): make the effect
    #: itself idempotent, e.g. with a unique constraint on :attr:`reference`.
    taken_over: bool = False

    @property
    def reference(self) -> str:
        """A stable reference of (scope, key), the same on every attempt and retry:
        ``idem_`` and 40 hex digits. Store it under a unique constraint of the view's own
        (a ledger reference, a payment number) so an effect happens once even when its
        idempotency record was lost."""
        return f"idem_{record_digest(self.scope, self.key)}"

    def save_recovery_point(self, name: str, data: Any = None) -> None:
        if self.mode != "lease":
            raise RuntimeError("Recovery points need lease mode (atomic mode rolls back whole).")
        if not self.store.save_recovery_point(
            self.scope, self.key, fence=self.fence, name=name, data=data
        ):
            raise StaleOwner(self.scope, self.key)
        self.recovery_point = name
        self.recovery_data = data


def _context(request: Any) -> Any:
    context = getattr(request, "idempotency", None)
    if context is None:
        context = getattr(getattr(request, "_request", None), "idempotency", None)
    if context is None:
        raise ImproperlyApplied(
            "This request is not handled under an idempotency key (no key, or no @idempotent)."
        )
    return context


def recovery_point(request: HttpRequest | Any, name: str, data: Any = None) -> None:
    """Record that the phase ``name`` of this keyed request is committed.

    A retry with the same key then starts from it (:func:`get_recovery_point`). The
    write is fenced: a request whose lease was taken over records nothing.

    Args:
        request: The view's request (Django's or DRF's).
        name: The phase just committed, such as ``"charged"``.
        data: JSON-serialisable data the next phases need (a charge id).

    Raises:
        ImproperlyApplied: The request is not handled under an idempotency key.
    """
    _context(request).save_recovery_point(name, data)


def get_recovery_point(request: HttpRequest | Any) -> tuple[str, Any]:
    """``(name, data)`` of the last recorded phase, ``("", None)`` on a first attempt.

    Raises:
        ImproperlyApplied: The request is not handled under an idempotency key.
    """
    context = _context(request)
    return context.recovery_point, context.recovery_data


def in_flow(request: Any) -> bool:
    """Whether an outer interface (the middleware, the mixin, another ``@idempotent``)
    already handles this request's key: an inner one then only runs the view.

    ``request.idempotency`` is set on the instance the flow was given, a DRF ``Request``
    or the Django one it wraps (its ``_request``): both instance dictionaries are read
    (``getattr`` on a DRF ``Request`` that lacks it raises and catches three
    ``AttributeError``)."""
    attributes = vars(request)
    context = attributes.get("idempotency")
    if context is None and "_request" in attributes:
        context = vars(attributes["_request"]).get("idempotency")
    return isinstance(context, IdempotencyContext)


def _scope_kind(kind: str | None, scope: str) -> str:
    if kind is not None:
        return kind
    kind, colon, _ = scope.partition(":")
    return kind if colon else "custom"


def route_of(request: HttpRequest) -> str:
    """The URL pattern that matched ``request`` (bounded, unlike the path), for metrics."""
    match = getattr(request, "resolver_match", None)
    return str(match.route) if match is not None and match.route else "<unmatched>"


def prepare(request: HttpRequest, policy: Policy) -> Job | HttpResponseBase | None:
    """Whether ``request`` takes part: None to run the view plainly, a response for an
    error, or the job of its key. ImproperlyConfigured for a store that cannot work."""
    plain: HttpRequest = getattr(request, "_request", request)  # DRF's Request wraps it
    if plain.method not in UNSAFE_METHODS or not idempotency_settings.ENABLED:
        return None
    try:
        key = parse_key(header_value(plain, idempotency_settings.HEADER))
        if key is None:
            if policy.get_required():
                raise KeyRequired(
                    f"This endpoint requires an {idempotency_settings.HEADER} header."
                )
            return None
        scope = policy.get_scope(request)
        if scope is None:
            if idempotency_settings.ANONYMOUS == "ignore":
                return None
            raise AnonymousNotAllowed()
        fingerprint = policy.get_fingerprint(request)
    except (KeyInvalid, KeyRequired, AnonymousNotAllowed) as exc:
        if not isinstance(exc, AnonymousNotAllowed):
            signals.invalid_key.send(
                sender=None,
                request=request,
                scope=None,
                key=None,
                code=exc.code,
                route=route_of(request),
                claim_seconds=None,
            )
        return exc.as_response()
    except RequestDataTooBig:
        return problem_response(
            413,
            "payload-too-large",
            "Payload too large",
            "The request body is larger than the server accepts.",
        )
    options = resolve(policy)
    path = plain.path
    return Job(
        store=options.store,
        scope=scope,
        key=key,
        fingerprint=fingerprint,
        mode=options.mode,
        lease=options.lease,
        ttl=options.ttl,
        wait=options.wait,
        method=plain.method or "",
        route=path,
        owner=path,
        interface="http",
        scope_kind=_scope_kind(options.scope_kind, scope),
        request=request,
        quota=options.quota,
        optimistic=options.optimistic,
        databases=options.databases,
    )


async def aprepare(request: HttpRequest, policy: Policy) -> Job | HttpResponseBase | None:
    """:func:`prepare` for async views: a request that takes part has its caller's user
    loaded on the event loop (``request.auser()``) before the scope reads it."""
    plain: HttpRequest = getattr(request, "_request", request)
    if plain.method in UNSAFE_METHODS and header_value(plain, idempotency_settings.HEADER):
        await aload_user(request)
    return prepare(request, policy)
