"""A program in a language made ready to run, and its runs: what ``run_code`` runs once and
``code_eval`` runs once per test case.

The source and its files are written into a directory of the session's workspace, compiled at
most once (or taken from a compile cache, ``tools._compile_cache``), and each run is a fresh
process (how each step runs, confined and accounted as the program's role says:
``tools._steps``). A run in a directory of its own (``fresh_directory``) starts from a copy of
the source, the files and what the compile made, so that one test case leaves nothing for the
next. The compiler and every run, in every language, may change files only in their own
directory, ``TMPDIR`` included (``sandbox._landlock.confine_writes``), and a program run once
(not a test case) its worker's run layer too (``sandbox._run_root``). Where Landlock is
missing, nothing is cached.

The session's other calls can change the workspace while this one writes there (put a link
where a file of ours is about to go): every file written or copied for a run is opened beneath
its directory's descriptor, never through a link (``sandbox._beneath``).

With the engine's shared cache the compile happens in a directory of its own in the call's tmp,
which no other call can write, and it reads only the toolchain, the system, the engine's read
roots and the precompiled headers besides it: what it makes depends on the key alone. Its
outputs are then copied into the run's directory, and offered to the cache, which only the
supervisor writes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Callable

from a2e_engine.sandbox._beneath import copy_beneath, make_dirs_beneath, open_dir
from a2e_engine.tools._compile_cache import (
    CompileCache,
    Outputs,
    PrecompiledHeaders,
    caches_for,
    outputs_of,
    read_outputs,
    write_outputs,
)
from a2e_engine.tools._confined import decoded_files, write_decoded
from a2e_engine.tools._languages import Language, toolchain_path
from a2e_engine.tools._processes import TextSink
from a2e_engine.tools._python_main import fresh_interpreter as fresh_interpreter_of
from a2e_engine.tools._steps import (
    TMP,
    Launch,
    Program,
    RunLimits,
    StepResult,
    Steps,
    not_started,
)
from a2e_engine.tools._template_cases import TemplateCases

__all__ = ["Submission"]


class Submission:
    """A program made ready in a directory of its own: written, compiled at most once, and
    copied for each run that must start from nothing (``fresh_directory``). Its steps run as
    its role says (``steps``, ``tools._steps``)."""

    def __init__(
        self,
        program: Program,
        workspace: str,
        plugin_dirs: tuple[str, ...] = (),
        read_roots: tuple[str, ...] = (),
        template: TemplateCases | None = None,
        fresh_interpreter: bool = False,
    ) -> None:
        """``plugin_dirs``: the engine's shared compile cache, when the tool was given it
        (``tools._compile_cache.caches_for``); ``read_roots``: what the engine lets calls read
        besides the system (a toolchain there). ``template``: runs of a language run warm are
        forks of the worker's clean template (``tools._template_cases``), which holds nothing
        of what judges them, rather than of the worker. ``fresh_interpreter``: the caller asks
        that a language that can run in a fork of the worker's warm interpreter
        (``Language.warm``, ``tools._python_main``) run in a process of its own instead; a
        program whose role may not fork the worker runs warm only in a fork of the template.
        The files are checked here (a path outside the run's directory, content that is not
        base64), written later."""
        language, code = program.language, program.code
        self.program = program
        self.language = language
        self.code = code
        self.files = dict(program.files)
        self.workspace = workspace
        # A language without a compile step has nothing to cache.
        compiled = language.compile is not None
        self.cache, self.headers = caches_for(plugin_dirs, workspace) if compiled else (None, None)
        forks_worker = program.role.forks_worker and not fresh_interpreter
        may_run_warm = language.warm and (forks_worker or template is not None)
        warm = fresh_interpreter_of() if may_run_warm else None
        self.steps = Steps(program, workspace, read_roots, warm, template)
        self._workspace_fd = open_dir(workspace)
        self._home_fd = -1
        try:
            self.home = _make_dir(self._workspace_fd, workspace, "run-")
            self._home_fd = open_dir(self.home)
            self._filled = False
            self._contents = [*decoded_files(self.home, self.files)]
            self._contents.append((language.source_name(code), language.source_text(code).encode()))
        except BaseException:
            self.close()
            raise
        # What each run starts from; files given by absolute path are the run layer's, once.
        self._payload = [path for path, _ in self._contents if not os.path.isabs(path)]

    def compile(self, seconds: float, out: TextSink, err: TextSink) -> StepResult | None:
        """The compile step's result (``cached`` says whether it ran), None for a language
        without one. Its outputs join what each run starts from."""
        language, cache = self.language, self.cache
        if language.compile is None:
            return None
        key = cache.key(language, self.code, self.files) if cache is not None else ""
        hit = cache.lookup(key) if cache is not None else None
        if hit is not None:
            self._fill_home()
            compiled = {**hit.place(self._home_fd, self.home), "cached": True}
        elif cache is not None and cache.shared:
            compiled, outputs = self._compile_apart(cache, key, seconds, out, err)
            self._fill_home()
            write_outputs(outputs, self._home_fd)
        else:
            self._fill_home()
            argv = language.compile_argv(self.code, self.home)
            compiled = {**self.steps.tool(argv, self.home, seconds, out, err), "cached": False}
            if cache is not None and compiled["return_code"] == 0:
                made = _outputs(self.home, language)
                if made:
                    cache.store(key, made, compiled, self.home)
        self._payload.extend(outputs_of(self.home, language.outputs))
        return compiled

    def check_syntax(self, seconds: float, out: TextSink, err: TextSink) -> StepResult | None:
        """For a language without a compile step, whether the program parses, as a compile
        step's result when it does not (None when it does, or cannot be checked here): graders
        call a program that does not parse a compile error, not a failure of each case. A
        language run warm is parsed here, as its interpreter would parse it, with what it
        would print; another by its ``syntax_check`` command, if the host has it."""
        language = self.language
        if language.compile is not None:
            return None
        if language.warm:
            try:
                compile(self.code, language.source_name(self.code), "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                message = "".join(traceback.format_exception_only(exc))
                return {**not_started(message), "status": "Finished", "return_code": 1}
            except (MemoryError, RecursionError) as exc:
                return {**not_started(f"{type(exc).__name__}: too large or deep to parse")}
            return None
        if not language.syntax_check or toolchain_path(language.syntax_check[0]) is None:
            return None
        self._fill_home()
        argv = language.argv(language.syntax_check, self.code, self.home, 0)
        checked = self.steps.tool(argv, self.home, seconds, out, err)
        return checked if checked["return_code"] != 0 else None

    def _compile_apart(
        self, cache: CompileCache, key: str, seconds: float, out: TextSink, err: TextSink
    ) -> tuple[StepResult, Outputs]:
        """Compile in a private directory of the call's tmp, reading nothing a session could
        change; offer the outputs to the shared cache; the result and the outputs, for the
        run's directory. A program that includes a header worth precompiling gets it, once
        the supervisor has built it (this call asks for it when it is not)."""
        language = self.language
        built = tempfile.mkdtemp(prefix="build-")
        try:
            fd = open_dir(built)
            try:
                _write_contents(fd, [c for c in self._contents if not os.path.isabs(c[0])])
            finally:
                os.close(fd)
            include = self._precompiled()
            argv = language.compile_argv(self.code, built, include or "")
            readable = (include,) if include else ()
            compiled = {
                **self.steps.tool(argv, built, seconds, out, err, readable),
                "cached": False,
            }
            outputs = _outputs(built, language) if compiled["return_code"] == 0 else {}
            if outputs or language.failed_on_its_source(self.code, compiled):
                cache.store(key, outputs, compiled, built)  # a failure: the source's own
            else:
                cache.nothing_to_share(key)
            return compiled, outputs
        finally:
            shutil.rmtree(built, ignore_errors=True)

    def _precompiled(self) -> str | None:
        """The directory of the program's precompiled header, or None (the language has none,
        the program does not include it, or it is not built yet: asked for now)."""
        headers: PrecompiledHeaders | None = self.headers
        header = self.language.precompiled_header(self.code)
        if headers is None or not header:
            return None
        include = headers.ready(self.language, header)
        if include is None:
            headers.request(self.language, header)
        return include

    def _fill_home(self) -> None:
        """Write the source and the files into the run's directory, once: beneath it, or, given
        by an absolute path, beneath the run layer's directory that holds it, never through a
        link (the session's other calls may have put one there)."""
        if self._filled:
            return
        self._filled = True
        _write_contents(self._home_fd, self._contents)

    def fresh_directory(self) -> str:
        """A new directory holding what a run starts from (remove it once done)."""
        self._fill_home()
        where = _make_dir(self._workspace_fd, self.workspace, "case-")
        fd = open_dir(where)
        try:
            for relative in self._payload:
                copy_beneath(self._home_fd, fd, relative)
            os.close(make_dirs_beneath(fd, TMP, 0o700))
        finally:
            os.close(fd)
        return where

    def run(
        self,
        where: str,
        stdin: str | None,
        args: list[str],
        limits: RunLimits,
        out: TextSink,
        err: TextSink,
        tick: Callable[[], None] | None = None,
    ) -> StepResult:
        """One run in ``where`` (its home, or a fresh directory); ``tick`` is called often
        (every few milliseconds) while it runs."""
        self._fill_home()
        return self.steps.run(where, stdin, args, limits, out, err, tick)

    def launch(self, where: str, args: list[str], limits: RunLimits) -> Launch:
        """A run in ``where`` made ready to start on descriptors of the caller's
        (``tools._steps.Steps.launch``)."""
        self._fill_home()
        return self.steps.launch(where, args, limits)

    def close(self) -> None:
        if self._home_fd >= 0:
            os.close(self._home_fd)
            self._home_fd = -1
        if self._workspace_fd >= 0:
            if getattr(self, "home", None):
                shutil.rmtree(
                    os.path.basename(self.home), ignore_errors=True, dir_fd=self._workspace_fd
                )
            os.close(self._workspace_fd)
            self._workspace_fd = -1


def _write_contents(where: int, contents: list[tuple[str, bytes]]) -> None:
    """Write each (path, content) of ``decoded_files`` for the directory ``where`` (a
    descriptor), never through a link, and make its ``TMPDIR``."""
    for path, data in contents:
        write_decoded(where, path, data)
    os.close(make_dirs_beneath(where, TMP, 0o700))


def _outputs(where: str, language: Language) -> Outputs:
    """What the compile step made in ``where``, read to be kept; none when it is not plain
    files at the top of it (a link, a FIFO), or cannot be read."""
    try:
        return read_outputs(where, language.outputs) or {}
    except OSError:
        return {}


def _make_dir(parent: int, parent_path: str, prefix: str) -> str:
    """A new directory with an unguessable name in ``parent`` (a descriptor of
    ``parent_path``); its path."""
    while True:
        name = f"{prefix}{os.urandom(4).hex()}"
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
            return os.path.join(parent_path, name)
        except FileExistsError:
            continue
