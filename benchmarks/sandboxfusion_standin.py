"""A stand-in for SandboxFusion's server, for ``a2e bench`` when no real one is given
(``--sandboxfusion-url``): its ``POST /run_code`` for ``python`` and ``cpp`` and its ``GET
/v1/ping``, behind Starlette and uvicorn, answering in its shape.

    python -m a2e_engine.benchmarks.sandboxfusion_standin [--port N] [--python PATH]

It prints ``sandboxfusion stand-in: serving on http://127.0.0.1:PORT`` on stderr once it
listens, and serves on loopback only.

What it does as SandboxFusion does, with its default ``local`` configuration (``isolation:
none``; read from bytedance/SandboxFusion's ``sandbox/runners/major.py``, ``runners/base.py``
and ``server/sandbox_api.py``):

- per request, a temporary directory under ``/tmp``, the request's ``files`` written into it,
  and the code into a ``NamedTemporaryFile`` there (``.py``, ``.cpp``);
- ``python``: ``python <file>`` through ``/bin/bash -c``, in that directory, with the runtime
  interpreter's directory first on ``PATH`` (SandboxFusion's is its ``sandbox-runtime`` conda
  environment's; here ``--python``, by default this interpreter);
- ``cpp``: ``g++ -std=c++17 <file> -o test <flags>``, then ``./test``, where the flags are those
  of ``-lcrypto -lssl -lpthread`` that link on this host, found by compiling an empty program
  with each on the first C++ request; no optimisation flag, as there;
- every command gets a ``preexec_fn`` (SandboxFusion's is a lambda whatever the limits), so it
  is a fork of the server, not a vfork; ``memory_limit_MB`` above 0 sets ``RLIMIT_AS``,
  ``RLIMIT_DATA`` and ``RLIMIT_STACK`` there;
- ``stdin``, ``compile_timeout`` and ``run_timeout`` (past it: ``TimeLimitExceeded``, and the
  process tree killed), ``fetch_files`` read back as base64;
- the answer's ``status`` as its ``parse_run_status``: ``SandboxError`` if a step could not
  start, ``Failed`` on a time limit or a non-zero exit, else ``Success``.

What it does not do: the other languages (a ``SandboxError`` says so), the ``lite`` isolation
(overlayfs, cgroups, a network namespace, chroot), ``set_uid``, ``cleanup_process`` and
``restore_bash`` (off in ``local`` too), the datasets' and judges' endpoints. It logs nothing
per request (SandboxFusion logs each at DEBUG through structlog, and a request with ``stdin``
logs a traceback: its runner calls ``flush()`` on an asyncio ``StreamWriter``, which has none).
It runs on asyncio's loop, not uvloop, and on Starlette, not FastAPI, in a smaller process than
SandboxFusion's (which imports transformers for its datasets): so it should be cheaper per
request than the real server, and a ratio to it a lower bound of the ratio to the real one. It
reads the outputs until the program closes them, where SandboxFusion reads what is buffered
when the program has exited.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import resource
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import psutil
import uvicorn
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["READY", "app", "main"]

#: The line on stderr that says where it serves.
READY = "sandboxfusion stand-in: serving on "
#: The C++ runtime flags SandboxFusion adds where they link.
OPTIONAL_CPP_FLAGS = ("-lcrypto", "-lssl", "-lpthread")
#: How long the outputs of a program that ended are read before giving up on them (a child of
#: it still holding them open).
DRAIN_S = 1.0


class RunCodeRequest(BaseModel):
    """SandboxFusion's request, with its defaults; ``language`` is checked by the runner."""

    compile_timeout: float = 10
    run_timeout: float = 10
    memory_limit_MB: int = -1
    code: str
    stdin: str | None = None
    language: str
    files: dict[str, str | None] = {}
    fetch_files: list[str] = []


def _step(
    status: str,
    execution_time: float | None = None,
    return_code: int | None = None,
    stdout: str | None = None,
    stderr: str | None = None,
) -> dict[str, Any]:
    """SandboxFusion's ``CommandRunResult``, its keys in its order."""
    return {
        "status": status,
        "execution_time": execution_time,
        "return_code": return_code,
        "stdout": stdout,
        "stderr": stderr,
    }


def _preexec(memory_limit_mb: int) -> Callable[[], None]:
    def limit() -> None:
        if memory_limit_mb > 0:
            soft = memory_limit_mb * 1024 * 1024
            for kind in (resource.RLIMIT_AS, resource.RLIMIT_DATA, resource.RLIMIT_STACK):
                resource.setrlimit(kind, (soft, resource.getrlimit(kind)[1]))

    return limit


def _kill_tree(pid: int) -> None:
    try:
        parent = psutil.Process(pid)
        for child in parent.children(recursive=True):
            child.kill()
        parent.kill()
    except psutil.Error:
        pass


async def run_command(
    command: str,
    timeout: float,
    stdin: str | None,
    cwd: str,
    env: dict[str, str],
    memory_limit_mb: int,
) -> dict[str, Any]:
    """One step, as SandboxFusion's ``run_command_bare``: ``command`` through ``/bin/bash``."""
    try:
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            executable="/bin/bash",
            env=env,
            preexec_fn=_preexec(memory_limit_mb),
        )
    except OSError as exc:
        return _step("Error", stderr=f"exception on running command {command}: {exc}")
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    outputs = asyncio.gather(process.stdout.read(), process.stderr.read())

    async def finish() -> int:
        assert process.stdin is not None
        if stdin is not None:
            process.stdin.write(stdin.encode())
            with contextlib.suppress(ConnectionError):
                await process.stdin.drain()
        process.stdin.close()
        return await process.wait()

    started = time.time()
    status, return_code = "Finished", None
    try:
        return_code = await asyncio.wait_for(finish(), timeout)
    except TimeoutError:
        status = "TimeLimitExceeded"
    finally:
        if process.returncode is None:
            _kill_tree(process.pid)
    took = time.time() - started
    try:
        stdout, stderr = await asyncio.wait_for(outputs, DRAIN_S)
    except TimeoutError:
        outputs.cancel()
        stdout = stderr = b""
    return _step(
        status, took, return_code, stdout.decode(errors="replace"), stderr.decode(errors="replace")
    )


def _restore_files(where: str, files: dict[str, str | None]) -> None:
    for name, content in files.items():
        if not isinstance(content, str) or "IGNORE_THIS_FILE" in name:
            continue
        path = os.path.join(where, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(content))


def _fetch_files(where: str, names: list[str]) -> dict[str, str]:
    fetched = {}
    for name in names:
        path = os.path.abspath(os.path.join(where, name))
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                fetched[name] = base64.b64encode(fh.read()).decode()
    return fetched


class Runners:
    """SandboxFusion's ``run_python`` and ``run_cpp`` with ``isolation: none``."""

    def __init__(self, python: str) -> None:
        path = os.environ.get("PATH", os.defpath)
        self.python_env = {**os.environ, "PATH": f"{os.path.dirname(python)}:{path}"}
        self.cpp_flags: list[str] | None = None
        self.probing = asyncio.Lock()

    async def run(self, request: RunCodeRequest) -> dict[str, Any]:
        suffix, compile_command, run_command_, env = {
            "python": (".py", None, "python {file}", self.python_env),
            "cpp": (".cpp", "g++ -std=c++17 {file} -o test {flags}", "./test", dict(os.environ)),
        }[request.language]
        flags = " ".join(await self._cpp_flags()) if compile_command else ""
        with tempfile.TemporaryDirectory(dir="/tmp", ignore_cleanup_errors=True) as where:
            _restore_files(where, request.files)
            with tempfile.NamedTemporaryFile("w", dir=where, suffix=suffix, delete=False) as fh:
                fh.write(request.code)
            compiled = None
            if compile_command is not None:
                compiled = await run_command(
                    compile_command.format(file=fh.name, flags=flags),
                    request.compile_timeout,
                    None,
                    where,
                    env,
                    request.memory_limit_MB,
                )
            ran = None
            if compiled is None or (
                compiled["status"] == "Finished" and compiled["return_code"] == 0
            ):
                ran = await run_command(
                    run_command_.format(file=fh.name),
                    request.run_timeout,
                    request.stdin,
                    where,
                    env,
                    request.memory_limit_MB,
                )
            files = _fetch_files(where, request.fetch_files)
        return {"compile_result": compiled, "run_result": ran, "files": files}

    async def _cpp_flags(self) -> list[str]:
        async with self.probing:
            if self.cpp_flags is None:
                found = []
                with tempfile.TemporaryDirectory(dir="/tmp") as where:
                    source = os.path.join(where, "probe.cpp")
                    with open(source, "w") as fh:
                        fh.write("int main() {return 0;}")
                    for flag in OPTIONAL_CPP_FLAGS:
                        done = await run_command(
                            f"g++ {source} -o test {flag}", 10, None, where, dict(os.environ), -1
                        )
                        if done["status"] == "Finished" and done["return_code"] == 0:
                            found.append(flag)
                self.cpp_flags = found
            return self.cpp_flags


def _run_status(steps: list[dict[str, Any] | None]) -> tuple[str, str]:
    """SandboxFusion's ``parse_run_status``."""
    done = [step for step in steps if step is not None]
    for step in done:
        if step["status"] == "Error":
            return "SandboxError", step["stderr"] or ""
    if any(step["status"] == "TimeLimitExceeded" for step in done):
        return "Failed", ""
    if any(step["return_code"] not in (None, 0) for step in done):
        return "Failed", ""
    return "Success", ""


def app(python: str = sys.executable) -> Starlette:
    """The stand-in's ASGI application; programs in ``python`` run with ``python``."""
    runners = Runners(python)

    async def ping(request: Request) -> JSONResponse:
        return JSONResponse("pong")

    async def run_code(request: Request) -> JSONResponse:
        try:
            body = RunCodeRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"detail": exc.errors(include_url=False)}, status_code=422)
        answer: dict[str, Any] = {
            "status": "Success",
            "message": "",
            "compile_result": None,
            "run_result": None,
            "executor_pod_name": os.environ.get("MY_POD_NAME"),
            "files": {},
        }
        if body.language not in ("python", "cpp"):
            answer["status"] = "SandboxError"
            answer["message"] = f"language {body.language!r}: the stand-in runs python and cpp"
            return JSONResponse(answer)
        try:
            answer |= await runners.run(body)
        except Exception as exc:
            answer["status"] = "SandboxError"
            answer["message"] = f"exception on running code: {exc}"
            return JSONResponse(answer)
        status, message = _run_status([answer["compile_result"], answer["run_result"]])
        answer["status"] = status
        if status == "SandboxError":
            answer["message"] = message
        return JSONResponse(answer)

    return Starlette(
        routes=[
            Route("/run_code", run_code, methods=["POST"]),
            Route("/v1/ping", ping, methods=["GET"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m a2e_engine.benchmarks.sandboxfusion_standin",
        description="What SandboxFusion's /run_code does for python and cpp (isolation none), "
        "on 127.0.0.1, for a2e bench.",
    )
    parser.add_argument("--port", type=int, default=0, help="0 (the default): a free one")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter programs run with (this one)"
    )
    args = parser.parse_args(argv)
    # IPPROTO_TCP said outright: asyncio sets TCP_NODELAY only on connections whose socket
    # names it, and without it each answer's body waited ~40 ms for the client's delayed ACK.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", args.port))
    except OSError as exc:
        parser.exit(1, f"sandboxfusion stand-in: cannot listen on port {args.port}: {exc}\n")
    listener.listen(2048)
    config = uvicorn.Config(app(args.python), log_level="warning", access_log=False, lifespan="off")
    print(f"{READY}http://127.0.0.1:{listener.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[listener])
    return 0


if __name__ == "__main__":
    sys.exit(main())
