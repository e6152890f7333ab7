"""A mypy plugin that checks the keywords of ``Task.enqueue``: the job's options, and the
payload's fields.

``send_email.enqueue(Email(to="a@b.c"))`` is checked by mypy alone. The keyword form,
``send_email.enqueue(to="a@b.c")``, takes the fields of the payload type as keywords
beside the job's options (jobqueue.model.options.EnqueueOptions), which no Python
annotation can express; with this plugin mypy checks the options' names and types,
and the fields' against the payload type (a dataclass, a TypedDict, or a pydantic model: add
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

from mypy.nodes import ARG_NAMED_OPT, ARG_STAR2, ArgKind, FuncDef, MypyFile, TypeInfo
from mypy.plugin import MethodSigContext, Plugin
from mypy.types import CallableType, Instance, Type, TypedDictType, get_proper_type

OPTIONS = "jobqueue.model.options.EnqueueOptions"
ENQUEUE_METHODS = frozenset({"jobqueue.task.Task.enqueue", "jobqueue.task.Task.enqueue_async"})


class JobqueuePlugin(Plugin):
    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], CallableType] | None:
        return _with_payload_fields if fullname in ENQUEUE_METHODS else None

    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        # The options' declaration, loaded wherever a task may be enqueued.
        return [(10, OPTIONS.rpartition(".")[0], -1)]


def plugin(version: str) -> type[Plugin]:
    return JobqueuePlugin


def _with_payload_fields(ctx: MethodSigContext) -> CallableType:
    """The method's signature with ``**given: Any`` replaced by the job's options and
    the payload type's fields, as optional keywords; for a payload whose fields mypy
    cannot see (a plain dict), the options and ``**given`` for the rest."""
    signature = ctx.default_signature
    task = get_proper_type(ctx.type)
    fields = _fields(task.args[0]) if isinstance(task, Instance) and task.args else None
    names: list[str | None] = []
    kinds: list[ArgKind] = []
    types: list[Type] = []
    rest = None
    for name, kind, type_ in zip(
        signature.arg_names, signature.arg_kinds, signature.arg_types, strict=True
    ):
        if kind == ARG_STAR2:
            rest = (name, kind, type_)
        else:
            names.append(name)
            kinds.append(kind)
            types.append(type_)
    taken = set(names)
    for name, type_ in {**_options(ctx), **(fields or {})}.items():
        if name not in taken:  # an option's name is the option's, as at run time
            taken.add(name)
            names.append(name)
            kinds.append(ARG_NAMED_OPT)
            types.append(type_)
    if fields is None and rest is not None:
        names.append(rest[0])
        kinds.append(rest[1])
        types.append(rest[2])
    return signature.copy_modified(arg_names=names, arg_kinds=kinds, arg_types=types)


def _options(ctx: MethodSigContext) -> dict[str, Type]:
    """The items of EnqueueOptions, each as its own type."""
    module, _, name = OPTIONS.rpartition(".")
    # The checker's modules (CheckerPluginInterface does not declare them): a lookup by
    # full name would walk from ``jobqueue``, whose __init__ does not import the leaf.
    modules: dict[str, MypyFile] = getattr(ctx.api, "modules", {})
    found = modules.get(module)
    symbol = found.names.get(name) if found is not None else None
    info = symbol.node if symbol is not None else None
    if not isinstance(info, TypeInfo) or info.typeddict_type is None:
        return {}
    return dict(info.typeddict_type.items)


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
