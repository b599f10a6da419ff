"""`clusterplan users …` and `clusterplan tokens …`: accounts and personal API tokens from the shell."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


class UserError(ValueError):
    """A problem with the user's input (a ValueError, so `clusterplan` prints it and exits 2).

    Not app.cli.main.UserError: under `python -m app.cli.main` that module runs as __main__, so its
    except clause would not catch the class imported from app.cli.main.
    """


def register(root: typer.Typer) -> None:
    users = typer.Typer(help="User accounts (argon2id-hashed passwords).", no_args_is_help=True)
    users.command("create", help="Create a user; the password is prompted for, or read from stdin.")(
        create_user
    )
    users.command("list", help="List user accounts.")(list_users)
    users.command(
        "set-password",
        help="Set a new password (prompted, or read from stdin); signs the user out everywhere.",
    )(set_password)
    users.command("set-admin", help="Make a user an administrator (--no-admin: withdraw it).")(set_admin)
    users.command(
        "set-email", help="Move a user to another e-mail (an administrator's change: nothing is mailed)."
    )(set_email)
    users.command("deactivate", help="Disable a user: their sessions and API tokens stop working.")(
        deactivate
    )
    users.command("activate", help="Re-enable a deactivated user.")(activate)
    root.add_typer(users, name="users")
    tokens = typer.Typer(help="Personal API tokens (shown once, stored hashed).", no_args_is_help=True)
    tokens.command("create", help="Issue a token for a user and print it once.")(create_token)
    tokens.command("list", help="List a user's tokens (prefixes only).")(list_tokens)
    tokens.command("revoke", help="Revoke a token by id or by its prefix.")(revoke_token)
    root.add_typer(tokens, name="tokens")


def _session():  # type: ignore[no-untyped-def]
    from sqlmodel import Session

    from app.db import get_engine
    from app.startup import prepare_database

    prepare_database()
    return Session(get_engine())


def create_user(
    email: Annotated[str, typer.Argument(help="e-mail address, used to sign in")],
    admin: Annotated[bool, typer.Option("--admin", help="make the user an administrator")] = False,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="read the password from the first line of stdin")
    ] = False,
) -> None:
    from app.auth.users import create_user as create

    password = _read_password(password_stdin)
    with _session() as session:
        user = create(session, email, password, is_admin=admin)
        typer.echo(f"created {'administrator' if user.is_admin else 'user'} {user.email} ({user.id})")


def list_users() -> None:
    from app.auth.users import list_users as list_all

    with _session() as session:
        rows, total = list_all(session, 0, 10_000)
        for user in rows:
            flags = ",".join(
                f for f, on in (("admin", user.is_admin), ("inactive", not user.is_active)) if on
            )
            typer.echo(f"{user.id}  {user.email}  {flags}".rstrip())
        typer.echo(f"{total} user(s)")


def _read_password(password_stdin: bool) -> str:
    if password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))


def _find(session, email: str):  # type: ignore[no-untyped-def]
    from app.auth.users import find_user

    user = find_user(session, email)
    if user is None:
        raise UserError(f"no user with e-mail {email!r}")
    return user


def set_password(
    email: Annotated[str, typer.Argument(help="the user's e-mail")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="read the password from the first line of stdin")
    ] = False,
) -> None:
    """Also the way back in for a locked-out administrator: it needs shell access, not the web."""
    from app.auth.users import set_password as change

    password = _read_password(password_stdin)
    with _session() as session:
        user = change(session, _find(session, email), password)
        typer.echo(f"password changed for {user.email}; its sessions are signed out")


def set_admin(
    email: Annotated[str, typer.Argument(help="the user's e-mail")],
    admin: Annotated[bool, typer.Option("--admin/--no-admin", help="grant or withdraw administrator")] = True,
) -> None:
    with _session() as session:
        user = _find(session, email)
        user.is_admin = admin
        session.add(user)
        session.commit()
        typer.echo(f"{user.email} is {'now' if admin else 'no longer'} an administrator")


def set_email(
    email: Annotated[str, typer.Argument(help="the user's e-mail")],
    new_email: Annotated[str, typer.Argument(help="the address to move the account to")],
) -> None:
    """Shell access is an administrator's: the same rules as the API's (not to a taken or an invited address)."""
    from app.auth.users import UserExistsError, change_email

    with _session() as session:
        try:
            user = change_email(session, _find(session, email), new_email, by_admin=True)
        except UserExistsError as exc:
            raise UserError(str(exc)) from None
        typer.echo(f"{email} now signs in as {user.email}")


def deactivate(email: Annotated[str, typer.Argument(help="the user's e-mail")]) -> None:
    from app.auth.users import set_active

    with _session() as session:
        user = set_active(session, _find(session, email), False)
        typer.echo(f"deactivated {user.email}")


def activate(email: Annotated[str, typer.Argument(help="the user's e-mail")]) -> None:
    from app.auth.users import set_active

    with _session() as session:
        user = set_active(session, _find(session, email), True)
        typer.echo(f"activated {user.email}")


def create_token(
    user: Annotated[str, typer.Option("--user", help="e-mail of the token's owner")],
    name: Annotated[str, typer.Option("--name", help="what the token is for")],
    scope: Annotated[
        list[str],
        typer.Option("--scope", help="plans:read, plans:write, benchmarks:run or admin (repeatable)"),
    ],
    expires_days: Annotated[
        int, typer.Option("--expires-days", min=0, help="days until it expires; 0 = never")
    ] = 90,
) -> None:
    from app.auth.tokens import create_token as issue
    from app.auth.users import find_user

    with _session() as session:
        owner = find_user(session, user)
        if owner is None:
            raise UserError(f"no user with e-mail {user!r}; create one with `clusterplan users create`")
        try:
            issued = issue(session, owner, name, scope, expires_days or None)
        except PermissionError as exc:
            raise UserError(f"{exc} ({owner.email} is not an administrator)") from exc
        typer.echo(issued.plaintext)
        typer.echo(
            f"token {issued.token.prefix}… ({issued.token.id}) for {owner.email}, scopes {issued.token.scopes}; "
            "store it now, it is not shown again",
            err=True,
        )


def list_tokens(user: Annotated[str, typer.Option("--user", help="e-mail of the owner")]) -> None:
    from app.auth.tokens import is_expired
    from app.auth.tokens import list_tokens as list_for
    from app.auth.users import find_user

    with _session() as session:
        owner = find_user(session, user)
        if owner is None:
            raise UserError(f"no user with e-mail {user!r}")
        rows, _ = list_for(session, owner.id, 0, 10_000)
        for token in rows:
            state = "revoked" if token.revoked_at else "expired" if is_expired(token) else "active"
            used = token.last_used_at.isoformat() if token.last_used_at else "never"
            typer.echo(
                f"{token.id}  {token.prefix}…  {token.name}  [{token.scopes}]  {state}  last used {used}"
            )


def revoke_token(
    token: Annotated[str, typer.Argument(help="token id (UUID) or prefix such as cpt_AbCd1234")],
) -> None:
    import uuid

    from sqlmodel import select

    from app.auth.tokens import revoke_token as revoke
    from app.models.auth import ApiToken

    with _session() as session:
        try:
            matches = [session.get(ApiToken, uuid.UUID(token))]
        except ValueError:
            matches = list(session.exec(select(ApiToken).where(ApiToken.prefix == token[:12])))
        matches = [m for m in matches if m is not None]
        if len(matches) != 1:
            raise UserError(f"{'no' if not matches else 'more than one'} token matches {token!r}")
        row = revoke(session, matches[0])
        typer.echo(f"revoked {row.prefix}… ({row.id})")
