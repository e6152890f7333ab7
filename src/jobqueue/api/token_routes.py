"""The API's tokens over HTTP (scope `admin`): the same as `jobqueue tokens`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from jobqueue.api.responses import BODY, INVALID, UNAVAILABLE, declare
from jobqueue.api.state import jobqueue
from jobqueue.audit import Actor
from jobqueue.auth.authenticator import require
from jobqueue.auth.tokens import new_token
from jobqueue.enqueue.new_job import JobType, QueueName
from jobqueue.model.tokens import NAME, Principal, Scope, TokenError, TokenInfo

router = APIRouter()

TokenName = Annotated[
    str, Path(pattern=f"^{NAME.pattern}$", description="The token's name.", examples=["ci"])
]


class TokenOut(BaseModel):
    """A token as listed: never its secret."""

    name: str
    scopes: list[Scope]
    queues: list[str] | None
    types: list[str] | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    state: str = Field(description="`active`, `expired` or `revoked`")

    @classmethod
    def of(cls, info: TokenInfo, now: datetime) -> TokenOut:
        return cls(
            name=info.name,
            scopes=[Scope(s) for s in info.scopes],
            queues=None if info.queues is None else list(info.queues),
            types=None if info.types is None else list(info.types),
            created_at=info.created_at,
            expires_at=info.expires_at,
            revoked_at=info.revoked_at,
            state=info.state(now),
        )


class TokenList(BaseModel):
    tokens: list[TokenOut]


class NewToken(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=f"^{NAME.pattern}$", examples=["billing-app"])
    scopes: list[Scope] = Field(min_length=1, examples=[["jobs:enqueue", "jobs:read"]])
    # As a job's own queue and type are checked: text the database cannot store (a NUL,
    # half a surrogate pair) is a 422 naming the field, not a failed INSERT.
    queues: list[QueueName] | None = Field(
        default=None, min_length=1, description="Only these queues; null: every queue."
    )
    types: list[JobType] | None = Field(
        default=None, min_length=1, description="Only these job types; null: every type."
    )
    expires_in_seconds: float | None = Field(
        default=None, gt=0, le=10 * 365 * 86400, description="null: never expires."
    )


class TokenCreated(TokenOut):
    secret: str = Field(description="Shown in this answer only: store it now.")


@router.get(
    "/tokens",
    response_model=TokenList,
    summary="Every API token, without secrets",
    responses=declare(UNAVAILABLE),
)
async def list_tokens(
    request: Request, who: Annotated[Principal, require(Scope.ADMIN)]
) -> TokenList:
    """Revoked and expired tokens too, with their state."""
    now, infos = await jobqueue(request).tokens.list()
    return TokenList(tokens=[TokenOut.of(info, now) for info in infos])


@router.post(
    "/tokens",
    status_code=201,
    response_model=TokenCreated,
    summary="Create an API token",
    responses=declare(
        BODY, INVALID, UNAVAILABLE, {409: {"description": "An unrevoked token has this name"}}
    ),
)
async def create_token(
    request: Request,
    who: Annotated[Principal, require(Scope.ADMIN)],
    new: Annotated[NewToken, Body()],
) -> TokenCreated:
    """The answer holds the secret, once: only its hash is stored."""
    try:
        stored, secret = new_token(
            name=new.name, scopes=new.scopes, queues=new.queues, types=new.types
        )
    except TokenError as exc:  # pragma: no cover - the model checks the same first
        raise HTTPException(422, detail=str(exc)) from exc
    info = await jobqueue(request).tokens.create(
        stored, expires_in_seconds=new.expires_in_seconds, by=Actor.of(who)
    )
    if info is None:
        raise HTTPException(409, detail=f"a token named {new.name!r} exists; revoke it first")
    request.app.state.auth.invalidate()
    return TokenCreated(**TokenOut.of(info, datetime.now(UTC)).model_dump(), secret=secret)


@router.post(
    "/tokens/{name}/revoke",
    response_model=TokenOut,
    summary="Revoke an API token",
    responses=declare(
        INVALID, UNAVAILABLE, {404: {"description": "No unrevoked token has this name"}}
    ),
)
async def revoke_token(
    request: Request, who: Annotated[Principal, require(Scope.ADMIN)], name: TokenName
) -> TokenOut:
    """Every API process refuses it within a second."""
    info = await jobqueue(request).tokens.revoke(name, by=Actor.of(who))
    if info is None:
        raise HTTPException(404, detail=f"no unrevoked token is named {name!r}")
    request.app.state.auth.invalidate()
    return TokenOut.of(info, info.revoked_at or info.created_at)
