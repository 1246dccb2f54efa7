"""``IdempotentMixin`` for DRF views and viewsets, and :class:`DjangoRestFramework`, what
the app registers with :mod:`idempotency.http.views` so that ``@idempotent`` and the
middleware serve DRF views.

The key is handled once ``initial()`` has run, that is after authentication,
permissions and throttling, so an unauthenticated or unauthorised caller
never receives a stored response. Configure with class attributes or
override the ``get_*`` hooks; a ``@idempotent`` on a method wins over both.
:func:`hooks` says how a DRF view answers exceptions and renders responses, for the mixin
and for ``@idempotent`` on a DRF view's method.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from rest_framework.request import Empty, Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency.core.job import ReplayedRecord
from idempotency.http import handler as handling
from idempotency.http.fingerprints import keep_body
from idempotency.http.options import Policy, ReplayHook
from idempotency.http.requests import UNSAFE_METHODS, in_flow
from idempotency.http.views import Convert, Finalize, Framework, atomic_requests, policy_of


def view_of(request: Any) -> APIView | None:
    """The DRF view handling ``request`` (DRF puts it in the parser context)."""
    if not isinstance(request, Request):
        return None
    view = (getattr(request, "parser_context", None) or {}).get("view")
    return view if isinstance(view, APIView) else None


def hooks(view: APIView, request: Request | HttpRequest) -> tuple[Convert, Finalize]:
    """How to turn the view's exceptions into responses, and responses into bytes."""

    def convert(exc: Exception) -> HttpResponseBase:
        return view.handle_exception(exc)

    def finalize(response: HttpResponseBase) -> HttpResponseBase:
        if isinstance(response, Response) and not response.is_rendered:
            response = view.finalize_response(
                request,  # type: ignore[arg-type]  # a DRF view's handler gets DRF's Request
                response,
                *view.args,
                **view.kwargs,
            )
            response.render()
        return response

    return convert, finalize


if TYPE_CHECKING:
    #: What the mixin is mixed into, for the type checker: ``super()`` is an ``APIView``.
    _MixedInto = APIView
else:
    _MixedInto = object


class IdempotentMixin(_MixedInto):
    """Honour ``Idempotency-Key`` on the unsafe actions of a DRF view or viewset.

    Put it first among the bases (``class OrderViewSet(IdempotentMixin,
    ModelViewSet)``). Keys are handled after DRF's ``initial()`` (authentication,
    permissions, throttles), for ``create``, ``update``, ``partial_update``,
    ``destroy`` and unsafe ``@action`` methods, or the unsafe methods of an
    ``APIView``.

    Configure it with class attributes ``idempotency_<option>``, one per option of
    :class:`~idempotency.http.options.Policy`, each None by default (the ``IDEMPOTENCY``
    setting of the same name applies); ``idempotent_actions`` limits it to the named
    actions or methods. Override :meth:`get_idempotency_scope` to key by
    something other than the user, :meth:`on_replay` to add headers to replayed
    responses, or :meth:`get_idempotency_policy` to decide per request.
    """

    idempotency_policy: Policy | None = None
    idempotency_required: bool | None = None
    idempotency_ttl: float | None = None
    idempotency_lease: float | None = None
    idempotency_store: Any = None
    idempotency_mode: str | None = None
    idempotency_wait: float | None = None
    idempotency_store_errors: bool | None = None
    idempotency_on_store_unavailable: str | None = None
    idempotency_claim: str | None = None
    idempotency_databases: Collection[str] | None = None
    idempotency_fingerprint: Any = None
    idempotency_status_only: bool | None = None
    idempotency_redact: Collection[str] | None = None
    idempotency_max_new_records: int | None = None
    idempotency_record_window: float | None = None
    idempotency_error_ttl: float | None = None
    idempotency_on_replay: ReplayHook | None = None
    #: Names of the actions (viewsets) or methods that take part; None: every unsafe one.
    idempotent_actions: Collection[str] | None = None

    def get_idempotency_scope(self, request: HttpRequest) -> str | None:
        """The scope of the caller's keys; by default the ``SCOPE`` setting (the user)."""
        base = self.idempotency_policy or Policy()
        return base.get_scope(request)

    def on_replay(self, request: Request, response: HttpResponse, record: ReplayedRecord) -> None:
        """Called with each response this view replays from its record, before it is sent:
        override it to add headers (an expiry from ``record.expires_at``, a trace id).
        It may not change the status or the body. Not overridden, the
        ``idempotency_on_replay`` attribute, then the ``ON_REPLAY`` setting, apply."""

    def get_idempotency_policy(self) -> Policy:
        """The options of this view: its class attributes over ``idempotency_policy``
        (one ``idempotency_<name>`` per option of :class:`~idempotency.http.options.Policy`;
        ``scope`` comes from :meth:`get_idempotency_scope`)."""
        base = self.idempotency_policy or Policy()
        # the instance's own value (as_view()'s arguments), else the class's, read from the
        # class: a function given as an attribute is not bound, a staticmethod is unwrapped
        own, cls = vars(self), type(self)
        options: dict[str, Any] = {}
        for name in Policy.option_names():
            attr = f"idempotency_{name}"
            options[name] = own[attr] if attr in own else getattr(cls, attr, None)
        options["scope"] = self.get_idempotency_scope
        if type(self).on_replay is not IdempotentMixin.on_replay:
            options["on_replay"] = self.on_replay
        return base.merged(**options)

    def is_idempotent_action(self, request: Request) -> bool:
        """Whether this request's action (or method) takes part (``idempotent_actions``)."""
        if self.idempotent_actions is None:
            return True
        name = getattr(self, "action", None) or str(request.method).lower()
        return name in self.idempotent_actions

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method in UNSAFE_METHODS:
            # before authentication can parse request.data: the fingerprint reads the raw body
            keep_body(request)
        super().initial(request, *args, **kwargs)
        if request.method not in UNSAFE_METHODS or not self.is_idempotent_action(request):
            return
        if in_flow(request):
            return  # an outer interface handles this request's key
        method = str(request.method).lower()
        handler = getattr(self, method, None)
        if handler is None or policy_of(handler) is not None:
            return  # no such method (405 follows), or @idempotent on it already applies
        policy = self.get_idempotency_policy()
        convert, finalize = hooks(self, request)

        def idempotent_handler(req: Request, *a: Any, **kw: Any) -> HttpResponseBase:
            return handling.run(
                req, lambda: handler(req, *a, **kw), policy, convert=convert, finalize=finalize
            )

        setattr(self, method, idempotent_handler)


def _as_view(cls: type[APIView], view_func: Any) -> Callable[..., Any]:
    """``cls`` with :class:`IdempotentMixin` mixed in, built as ``view_func`` was (its
    viewset actions and init arguments), under the same ``ATOMIC_REQUESTS`` rule Django
    applies to the view it resolved (and its ``non_atomic_requests`` opt-out)."""
    non_atomic: set[str] = getattr(view_func, "_non_atomic_requests", set())
    attrs: dict[str, Any] = {"__module__": cls.__module__}
    if non_atomic and getattr(cls, "idempotency_mode", None) is None:
        attrs["idempotency_mode"] = "lease"  # the view asked for no transaction
    subclass: Any = type(cls.__name__, (IdempotentMixin, cls), attrs)
    initkwargs = getattr(view_func, "initkwargs", {}) or {}
    actions = getattr(view_func, "actions", None)
    view: Callable[..., Any]
    if actions is not None:
        view = subclass.as_view(actions, **initkwargs)
    else:
        view = subclass.as_view(**initkwargs)
    return atomic_requests(view, view_func)


class DjangoRestFramework(Framework):
    """DRF's views: ``Request`` objects, ``APIView`` classes (keys handled after DRF's
    ``initial()`` by :class:`IdempotentMixin`), its exception handling and rendering."""

    request_types = (Request,)

    def answers(self, view: Any, request: Any) -> tuple[Convert, Finalize] | None:
        if not isinstance(view, APIView):
            view = view_of(request)
        return None if view is None else hooks(view, request)

    def view_class(self, cls: type, policy: Policy) -> type | None:
        if not issubclass(cls, APIView):
            return None
        return type(
            cls.__name__,
            (IdempotentMixin, cls),
            {
                "idempotency_policy": policy,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__doc__": cls.__doc__,
            },
        )

    def handles_keys(self, cls: type) -> bool:
        return issubclass(cls, IdempotentMixin)

    def owns(self, cls: type) -> bool:
        return issubclass(cls, APIView)

    def substitute(self, cls: type, view_func: Any) -> Callable[..., Any] | None:
        return _as_view(cls, view_func) if issubclass(cls, APIView) else None

    def class_policy(self, cls: type, callback: Any) -> Policy | None:
        if not issubclass(cls, IdempotentMixin):
            return None
        try:
            view = cls(**(getattr(callback, "initkwargs", None) or {}))
            return view.get_idempotency_policy()
        except Exception:  # noqa: BLE001 - a view that cannot be built here is not ours
            return None

    def parsed_data(self, request: Any) -> tuple[Any, Any] | None:
        if isinstance(request, Request) and getattr(request, "_data", Empty) is not Empty:
            return request.data, request.FILES  # a DRF Request that parsed it
        return None


__all__ = ["DjangoRestFramework", "IdempotentMixin", "hooks", "view_of"]
