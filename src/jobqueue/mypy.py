"""A mypy plugin that checks the keyword form of ``Task.enqueue``.

``send_email.enqueue(Email(to="a@b.c"))`` is checked by mypy alone. The keyword form,
``send_email.enqueue(to="a@b.c")``, takes the fields of the payload type as keywords,
which no Python annotation can express; with this plugin mypy checks their names and
types against the payload type (a dataclass, a TypedDict, or a pydantic model: add
pydantic's own plugin too, which gives models their field-by-field ``__init__``,
typed with ``init_typed``)::

    [tool.mypy]
    plugins = ["pydantic.mypy", "jobqueue.mypy"]

    [tool.pydantic-mypy]
    init_typed = true

Every field is optional to mypy here (a missing one is reported at run time, as a
PayloadError): a single signature cannot say "the payload, or all of its required
fields". A field named like an option (``queue``, ``priority``, ``conn``...) must go in
the payload object.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import ARG_NAMED_OPT, ARG_STAR2, FuncDef
from mypy.plugin import MethodSigContext, Plugin
from mypy.types import CallableType, Instance, Type, TypedDictType, get_proper_type

ENQUEUE_METHODS = frozenset({"jobqueue.task.Task.enqueue", "jobqueue.task.Task.enqueue_async"})


class JobqueuePlugin(Plugin):
    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], CallableType] | None:
        return _with_payload_fields if fullname in ENQUEUE_METHODS else None


def plugin(version: str) -> type[Plugin]:
    return JobqueuePlugin


def _with_payload_fields(ctx: MethodSigContext) -> CallableType:
    """The method's signature with ``**fields: Any`` replaced by the payload type's
    fields, as optional keywords."""
    signature = ctx.default_signature
    task = get_proper_type(ctx.type)
    if not isinstance(task, Instance) or not task.args:
        return signature
    fields = _fields(task.args[0])
    if fields is None:  # a plain dict payload, or a type whose fields mypy cannot see
        return signature
    names, kinds, types = [], [], []
    for name, kind, type_ in zip(
        signature.arg_names, signature.arg_kinds, signature.arg_types, strict=True
    ):
        if kind != ARG_STAR2:
            names.append(name)
            kinds.append(kind)
            types.append(type_)
    taken = set(names)
    for name, type_ in fields.items():
        if name not in taken:
            names.append(name)
            kinds.append(ARG_NAMED_OPT)
            types.append(type_)
    return signature.copy_modified(arg_names=names, arg_kinds=kinds, arg_types=types)


def _fields(payload_type: Type) -> dict[str, Type] | None:
    payload = get_proper_type(payload_type)
    if isinstance(payload, TypedDictType):
        return dict(payload.items)
    if not isinstance(payload, Instance):
        return None
    # A dataclass's __init__ comes from mypy's dataclass plugin, a pydantic model's from
    # pydantic's; BaseModel's own is (**data: Any) and says nothing of the fields.
    init = payload.type.get_method("__init__")
    if not isinstance(init, FuncDef) or init.info.fullname == "pydantic.main.BaseModel":
        return None
    init_type = get_proper_type(init.type)
    if not isinstance(init_type, CallableType):
        return None
    named = zip(
        init_type.arg_names[1:], init_type.arg_kinds[1:], init_type.arg_types[1:], strict=True
    )
    fields = {name: type_ for name, kind, type_ in named if name and not kind.is_star()}
    return fields or None
