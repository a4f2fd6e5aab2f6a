"""The sandbox side of E2B's protocol (what a real E2B sandbox serves from inside: envd on
port 49983, the code interpreter on 49999), on the service's own listener.

With ``E2B_SANDBOX_URL`` set to the service, the SDK sends every sandbox request there with
``E2b-Sandbox-Id`` (and ``E2b-Sandbox-Port``) naming its target, and the sandbox's access token
as ``X-Access-Token``: ``wants`` sends those requests here, ahead of the service's API-key
check, and here the token opens that one sandbox and no other (compared in constant time).
A signed file URL (``download_url``, ``upload_url``) carries no header: its signature is the
SDK's, ``v1_`` and the SHA-256 of the path, the operation, the user, the sandbox's token and
the expiry, and the sandbox is the one whose token makes it. The code interpreter's
``/contexts`` calls come without a token (the SDK sends none): the sandbox's id guards them.

Each use of a sandbox renews its life (``Sandboxes.touch``). A sandbox that is gone answers as
E2B's edge answers for one: 502, "sandbox ... was not found" (the SDK's
``SandboxNotRunningException``), or Connect's ``unavailable`` with those words.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from a2e_engine.engine.e2b._connect_rpc import RpcError, whole_number
from a2e_engine.engine.e2b._connect_rpc import error_response as rpc_error_response
from a2e_engine.engine.e2b._errors import error_response
from a2e_engine.engine.e2b._filesystem import FilesystemService, download, upload
from a2e_engine.engine.e2b._interpreter import Interpreter
from a2e_engine.engine.e2b._processes import ProcessService
from a2e_engine.engine.e2b._sandboxes import Sandbox, Sandboxes

__all__ = ["SandboxSide", "file_signature"]

Handler = Callable[[Request, Sandbox], Awaitable[Response]]
_SANDBOX_HEADER = b"e2b-sandbox-id"


def file_signature(path: str, operation: str, user: str, token: str, expires: str) -> str:
    """The SDK's signature of a file URL (``e2b.sandbox.signature.get_signature``)."""
    raw = f"{path}:{operation}:{user}:{token}" + (f":{expires}" if expires else "")
    digest = hashlib.sha256(raw.encode()).digest()
    return "v1_" + base64.b64encode(digest).decode().rstrip("=")


class SandboxSide:
    """envd's process and filesystem services, ``/files`` and ``/health``, and the code
    interpreter, for every sandbox of ``sandboxes``."""

    def __init__(self, sandboxes: Sandboxes, max_timeout: int, max_workers: int) -> None:
        """``max_timeout``: the engine's longest call, a command's or a cell's longest run;
        ``max_workers``: the calls the engine runs at once, of which one client's commands
        may hold half."""
        self.sandboxes = sandboxes
        self.processes = ProcessService(max_timeout, max(2, max_workers // 2))
        self.filesystem = FilesystemService()
        self.interpreter = Interpreter(max_timeout)
        sandboxes.on_end.append(self._ended)
        rpc = {
            "process.Process": self.processes.methods(),
            "filesystem.Filesystem": self.filesystem.methods(),
        }
        interpreter = self.interpreter
        #: The code interpreter's: path, method, handler, and whether the SDK sends the token.
        code: list[tuple[str, str, Handler, bool]] = [
            ("/execute", "POST", interpreter.execute, True),
            ("/contexts", "GET", interpreter.list_contexts, False),
            ("/contexts", "POST", interpreter.create_context, False),
            ("/contexts/{context_id}/restart", "POST", interpreter.restart_context, False),
            ("/contexts/{context_id}", "DELETE", interpreter.delete_context, False),
        ]
        self.app = Starlette(
            routes=[
                Route("/health", self._for(_health), methods=["GET"]),
                Route("/files", self._files, methods=["GET", "POST"]),
                *(
                    Route(path, self._for(handler, token), methods=[method])
                    for path, method, handler, token in code
                ),
                *(
                    Route(
                        f"/{service}/{{method}}",
                        self._for(_dispatch(methods), rpc=True),
                        methods=["POST"],
                    )
                    for service, methods in rpc.items()
                ),
            ],
            exception_handlers={HTTPException: _http_error},
        )

    @staticmethod
    def wants(scope: Scope) -> bool:
        """Whether a request is for a sandbox: it names one, or it is a signed file URL."""
        if scope["type"] != "http":
            return False
        if any(name == _SANDBOX_HEADER for name, _ in scope["headers"]):
            return True
        return bool(scope["path"] == "/files" and b"signature=" in scope["query_string"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def _ended(self, sandbox: Sandbox) -> None:
        self.processes.forget(sandbox)
        self.filesystem.forget(sandbox)
        self.interpreter.forget(sandbox)

    def _for(
        self, handler: Handler, token: bool = True, rpc: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` given the sandbox the request names, once its token is checked (not
        where the SDK sends none, ``token=False``); ``rpc``: a Connect method's, which says
        its refusals in Connect's shape."""

        async def endpoint(request: Request) -> Response:
            sandbox_id = request.headers.get("e2b-sandbox-id", "")
            sandbox = self.sandboxes.find(sandbox_id)
            if sandbox is None:
                return _gone(sandbox_id, rpc, why=self._why_ended(request, sandbox_id))
            if token and not _token_opens(request, sandbox.access_token):
                return _refused(rpc)
            if sandbox.paused:
                return _gone(sandbox_id, rpc, paused=True)
            self.sandboxes.touch(sandbox)
            try:
                return await handler(request, sandbox)
            except RpcError as exc:
                return rpc_error_response(exc)

        return endpoint

    async def _files(self, request: Request) -> Response:
        """``/files``: with the sandbox's token, or as a signed URL of one."""
        operation = "write" if request.method == "POST" else "read"  # HEAD reads
        path = request.query_params.get("path", "")
        sandbox_id = request.headers.get("e2b-sandbox-id")
        if "signature" in request.query_params:
            sandbox = self._signed(request, operation, path, sandbox_id)
            if sandbox is None:
                return _refused(why="the signature is not valid for this file, or expired")
        else:
            sandbox = self.sandboxes.find(sandbox_id or "")
            if sandbox is None:
                return _gone(sandbox_id or "", why=self._why_ended(request, sandbox_id or ""))
            if not _token_opens(request, sandbox.access_token):
                return _refused()
        if sandbox.paused:
            return _gone(sandbox.id, paused=True)
        self.sandboxes.touch(sandbox)
        if operation == "read":
            if not path:
                return error_response(400, "path is needed")
            return await download(request, sandbox, path)
        return await upload(request, sandbox, path or None)

    def _why_ended(self, request: Request, sandbox_id: str) -> str:
        """Why the engine ended that sandbox, for a request that holds its token; else ""."""
        ended = self.sandboxes.why_ended(sandbox_id)
        if ended is None or not _token_opens(request, ended.access_token):
            return ""
        return ended.why

    def _signed(
        self, request: Request, operation: str, path: str, sandbox_id: str | None
    ) -> Sandbox | None:
        """The sandbox whose token signed this URL, if the signature holds and has not
        expired; each live sandbox's is tried (the URL names none)."""
        given = request.query_params.get("signature", "")
        expires = request.query_params.get("signature_expiration", "")
        deadline = whole_number(expires)
        if expires and (deadline is None or deadline < time.time()):
            return None
        user = request.query_params.get("username", "")
        if sandbox_id is not None:
            named = self.sandboxes.find(sandbox_id)
            candidates = [named] if named is not None else []
        else:
            candidates = list(self.sandboxes.live())
        found = None
        for sandbox in candidates:
            expected = file_signature(path, operation, user, sandbox.access_token, expires)
            if hmac.compare_digest(given.encode(), expected.encode()) and found is None:
                found = sandbox
        return found


def _dispatch(methods: dict[str, Handler]) -> Handler:
    """A service's methods, by the name its path ends with."""

    async def call(request: Request, sandbox: Sandbox) -> Response:
        method = methods.get(request.path_params["method"])
        if method is None:
            raise RpcError("unimplemented", f"{request.url.path} is not a method of this server")
        return await method(request, sandbox)

    return call


def _gone(sandbox_id: str, rpc: bool = False, paused: bool = False, why: str = "") -> Response:
    """A sandbox that is not there, or is paused, as E2B's edge says it: envd's and the code
    interpreter's 502, or Connect's ``unavailable`` (the SDK's ``SandboxNotRunningException``
    either way); ``why``: why the engine ended it, for a request that holds its token."""
    message = f"sandbox {sandbox_id[:64]!r} was not found"
    if paused:
        message += ": it is paused, and runs again once connected to"
    elif why:
        message += f": it ended, {why}"
    if rpc:
        return rpc_error_response(RpcError("unavailable", message))
    return error_response(502, message)


def _refused(rpc: bool = False, why: str = "") -> Response:
    """A token that does not open the sandbox: 401, or Connect's ``unauthenticated``."""
    message = why or "wrong or missing access token for this sandbox (X-Access-Token)"
    if rpc:
        return rpc_error_response(RpcError("unauthenticated", message))
    return error_response(401, message)


def _token_opens(request: Request, access_token: str) -> bool:
    shown = request.headers.get("x-access-token", "")
    return hmac.compare_digest(shown.encode(), access_token.encode())


async def _health(request: Request, sandbox: Sandbox) -> Response:
    return Response(status_code=204)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    message = f"{request.method} {request.url.path} is not served on a sandbox"
    return error_response(status, message)
