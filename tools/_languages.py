"""The languages ``run_code`` runs: one declarative entry each.

An entry says where the source goes, how it is compiled (if it is) and how it runs, what the
compile step leaves for the run (the compile cache keeps exactly that), what its runtime needs
from the sandbox (environment, the memory flags that fit it), how it says it ran out of memory,
and what to install when its toolchain is missing. A new language is one entry.

Their flags are the ones judges use where it changes a verdict (docs/grading.md): C and C++ at
``-O2`` with GNU extensions and ``ONLINE_JUDGE`` defined, linking OpenSSL for a program that
includes it; Java with assertions on and javatuples on the class path (as MultiPL-E and
SandboxFusion run it) and ``-DONLINE_JUDGE=true``; Rust optimised with ``--cfg ONLINE_JUDGE``.

In a step, ``{source}`` is the source file, ``{main}`` its name without the suffix (Java's class),
``{memory_mb}`` the run's memory limit, ``{dir}`` the step's directory and ``{node_modules}`` the
global ``node_modules`` that holds the step's program (where the TypeScript compiler finds Node's
types); the same go for ``env``. Programs are looked
up on the sandbox's ``PATH`` (``/usr/local/bin:/usr/bin:/bin``): a toolchain the sandbox cannot
read (one under ``/root``, say) counts as missing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LANGUAGES", "Language", "toolchain_path", "toolchains"]

#: Where workers look for programs: the sandbox's own PATH, whatever the caller's is.
TOOLCHAIN_PATH = "/usr/local/bin:/usr/bin:/bin"

#: What a compiler writes when the machine, not the source, failed it.
_MACHINE_FAILURES = (
    "No space left",
    "Disk quota",
    "File too large",
    "Read-only file system",
    "Permission denied",
    "Too many open files",
    "Resource temporarily unavailable",
    "Cannot allocate memory",
    "out of memory",
    "OutOfMemory",
    "memory exhausted",
    "memory allocation of",
    "Killed",
    "killed",
    "signal terminated",
    "Segmentation fault",
    "internal compiler error",
    "Internal compiler error",
)
#: Where GCC (C and C++) and the Go compiler point at a line and column of the source.
_AT_LINE_AND_COLUMN = r"^(\./)?{source}:\d+:\d+: "

_FIRST_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.MULTILINE)


@dataclass(frozen=True)
class Language:
    name: str
    source: str  # the file the code is written to; "{main}" in it is taken from the code
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    outputs: tuple[str, ...] = ()  # what the compile step makes for the run (glob patterns)
    install: str = ""  # what to install when the toolchain is missing
    version: tuple[str, ...] = ()  # prints the toolchain's version (``a2e doctor``)
    env: Mapping[str, str] = field(default_factory=dict)
    out_of_memory: tuple[str, ...] = ()  # what its runtime writes to stderr when memory ran out
    main_pattern: str = ""  # a regex whose first group names ``{main}`` (Java's public class)
    default_main: str = "main"
    #: ``run`` is this interpreter on the source: the run may be a fork of the worker's own,
    #: made to look fresh (``tools._python_main``), rather than a new process.
    warm: bool = False
    #: Headers worth precompiling with the compile's own flags (``tools._compile_cache
    #: .PrecompiledHeaders``): a program whose first ``#include`` names one is compiled with it.
    precompile: tuple[str, ...] = ()
    #: A command that only parses the program and exits non-zero when it does not parse; a
    #: language run warm is parsed in the worker itself (``Submission.check_syntax``).
    syntax_check: tuple[str, ...] = ()
    #: What the source file starts with when the code does not (PHP's ``<?php``, which
    #: SandboxFusion adds the same way).
    opening: str = ""
    #: What graded programs import, each with where it lies when the host has it: a path, or
    #: ``module:<name>`` for a module the engine's interpreter (Python's) imports. ``a2e
    #: doctor`` lists which are there.
    runtime: tuple[tuple[str, str], ...] = ()
    #: What the run needs besides the toolchain's programs: a path, or ``module:<name>`` for a
    #: module of the engine's interpreter (a test runner's).
    needs: str = ""
    #: A test runner's mode (SandboxFusion's ``pytest``): the code is a test file, and the
    #: run's output is the runner's report, passing when every test does.
    test_runner: bool = False
    #: What a program that includes a header under this prefix is linked with as well.
    libraries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: A regex (``{source}`` standing for the source's name) matching a line of the compiler's
    #: output that points at a line of the source: what makes a failed compile the source's
    #: own (``failed_on_its_source``). Empty: no failed compile is taken as the source's.
    source_diagnostic: str = ""

    def failed_on_its_source(self, code: str, result: Mapping[str, Any]) -> bool:
        """Whether a failed compile step (``result``, in ``tools._submission``'s shape) failed
        because of the source, and so would fail the same way every time: it ran to its end
        (no limit stopped it), exited with an error status, its compiler pointed at a line of
        the source (``source_diagnostic``), and nothing it wrote tells of a failure of the
        machine (memory, disk, processes, a kill, a crash of the compiler). The compile cache
        keeps such a failure as it keeps a success; any other may be the machine's, or made to
        happen by a tenant, and is never handed to another call."""
        if not self.source_diagnostic or result.get("status") != "Finished":
            return False
        status = result.get("return_code")
        if type(status) is not int or not 0 < status < 128 or "exceeded" in result:
            return False
        said = f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}"
        if any(sign in said for sign in _MACHINE_FAILURES):
            return False
        source = re.escape(self.source_name(code))
        pattern = self.source_diagnostic.replace("{source}", source)
        return re.search(pattern, said, re.MULTILINE) is not None

    def main_name(self, code: str) -> str:
        if self.main_pattern:
            found = re.search(self.main_pattern, code, re.MULTILINE)
            if found:
                return found.group(1)
        return self.default_main

    def precompiled_header(self, code: str) -> str:
        """The header of ``precompile`` that ``code`` includes first, or "": a compiler can use
        a precompiled header only for the first one, before any code. A line that only looks
        like the first include (inside a comment) costs nothing: the compiler checks, and reads
        the header itself when the precompiled one does not apply."""
        if not self.precompile:
            return ""
        first = _FIRST_INCLUDE.search(code)
        return first.group(1) if first and first.group(1) in self.precompile else ""

    def source_name(self, code: str) -> str:
        return self.source.format(main=self.main_name(code))

    def source_text(self, code: str) -> str:
        """What the source file holds: the code, or, for a language with an ``opening``, the
        code without leading whitespace (which PHP would print) and after the opening if it
        lacks it, as SandboxFusion writes it."""
        if not self.opening:
            return code
        code = code.lstrip()
        return code if code.startswith(self.opening) else f"{self.opening}\n{code}"

    def argv(self, step: tuple[str, ...], code: str, where: str, memory_mb: int) -> list[str]:
        program = toolchain_path(step[0]) or step[0]
        values = self._values(code, where, memory_mb, program)
        return [program, *(part.format(**values) for part in step[1:])]

    def compile_argv(self, code: str, where: str, include: str = "") -> list[str]:
        """The compile step for ``code`` in ``where``; ``include``: a directory of
        precompiled headers searched first."""
        assert self.compile is not None
        argv = self.argv(self.compile, code, where, 0)
        if include:
            argv.insert(1, f"-I{include}")
        for prefix, flags in self.libraries.items():
            if f"<{prefix}" in code or f'"{prefix}' in code:
                argv.extend(flags)
        return argv

    def precompile_argv(self, header: str, output: str) -> list[str]:
        """The command that precompiles the C++ ``header`` into ``output`` with exactly the
        compile step's flags (a compiler uses a precompiled header only when they match): its
        options but the output file and the libraries."""
        assert self.compile is not None
        flags, parts = [], iter(self.compile[1:])
        for part in parts:
            if part == "-o":
                next(parts, None)
            elif part.startswith("-") and not part.startswith("-l"):
                flags.append(part)
        program = toolchain_path(self.compile[0]) or self.compile[0]
        return [program, *flags, "-x", "c++-header", header, "-o", output]

    def environment(self, code: str, where: str, memory_mb: int) -> dict[str, str]:
        values = self._values(code, where, memory_mb, "")
        return {name: value.format(**values) for name, value in self.env.items()}

    def _values(self, code: str, where: str, memory_mb: int, program: str) -> dict[str, object]:
        main = self.main_name(code)
        uses_node_modules = bool(program) and any(
            "{node_modules}" in part for part in (*(self.compile or ()), *self.run)
        )
        return {
            "source": self.source.format(main=main),
            "main": main,
            "memory_mb": memory_mb,
            "dir": where,
            # A walk up the program's real path: only for the steps that name it (TypeScript).
            "node_modules": _node_modules(program) if uses_node_modules else "",
        }

    def programs(self) -> list[str]:
        """The toolchain's programs (not what the compile step makes: ``./main``)."""
        steps = (self.compile, self.run)
        return [step[0] for step in steps if step and not step[0].startswith("./")]

    def missing(self) -> str | None:
        """Why this host cannot run the language, or None."""
        for program in self.programs():
            if toolchain_path(program) is None:
                hint = f"; install {self.install}" if self.install else ""
                return f"{self.name} needs {program}, which this host does not have{hint}"
        if self.needs and not _present(self.needs):
            what = self.needs.removeprefix("module:")
            where = "the engine's interpreter" if self.needs.startswith("module:") else "this host"
            hint = f"; install {self.install}" if self.install else ""
            return f"{self.name} needs {what}, which {where} does not have{hint}"
        return None

    def toolchain(self) -> tuple[tuple[str, int, int], ...]:
        """What identifies the toolchain for the compile cache: the real path, size and
        modification time of each program, of each file its compile step names (Kotlin's
        compiler is a jar on ``java``, its script launcher a source of the engine's) and of what
        it ``needs`` (an upgrade changes them; asking the compiler would cost a run)."""
        paths = [toolchain_path(program) for program in self.programs()]
        paths.extend(part for part in self.compile or () if os.path.isabs(part))
        if self.needs and not self.needs.startswith("module:"):
            paths.append(self.needs)
        found = []
        for path in paths:
            if path is not None and os.path.isfile(path):
                real = os.path.realpath(path)
                stat = os.stat(real)
                found.append((real, stat.st_size, stat.st_mtime_ns))
        return tuple(found)


def toolchains() -> dict[str, dict[str, object]]:
    """Per language: whether this host can run it, why not (with what to install), and the
    toolchain's version as it prints it (what ``a2e doctor`` shows)."""
    found: dict[str, dict[str, object]] = {}
    for name, language in LANGUAGES.items():
        missing = language.missing()
        report: dict[str, object] = {"available": missing is None}
        if missing:
            report["missing"] = missing
        else:
            if language.version:
                report["version"] = _version(language.version)
            if language.runtime:
                report["libraries"] = {label: _present(where) for label, where in language.runtime}
        found[name] = report
    return found


def _present(where: str) -> bool:
    if where.startswith("module:"):
        return importlib.util.find_spec(where.removeprefix("module:")) is not None
    return os.path.exists(where)


def _version(argv: tuple[str, ...]) -> str:
    """The first line the toolchain prints about itself (javac prints it on stderr)."""
    program = toolchain_path(argv[0]) or argv[0]
    try:
        done = subprocess.run(
            [program, *argv[1:]], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def toolchain_path(program: str) -> str | None:
    """``program`` as the sandbox finds it: an absolute path as it is, a name on its PATH."""
    if os.path.isabs(program):
        return program if os.access(program, os.X_OK) else None
    return shutil.which(program, path=TOOLCHAIN_PATH)


def _node_modules(program: str) -> str:
    """The ``node_modules`` directory above ``program``'s real path ('' when there is none)."""
    path = os.path.realpath(program)
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        if os.path.basename(path) == "node_modules":
            return path
    return ""


#: Debian's javatuples (libjavatuples-java): MultiPL-E's Java programs import it. A class path
#: entry that does not exist is passed over.
_JAVA_CLASS_PATH = ".:/usr/share/java/javatuples.jar"
#: A Java file's name comes from its public class. Blank space before it on its own line only:
#: ``^\s*`` would rescan every blank line after each one (the engine's loop reads this when it
#: works out a compile's key), and finds the same class.
_JAVA_PUBLIC_CLASS = r"^[^\S\n]*public\s+(?:final\s+)?class\s+(\w+)"
#: The run's own limit steers runtimes that would otherwise size their heap by the machine.
#: No perf data: it would go to /tmp, which the program may not write (``TMPDIR`` is its own).
_JVM = ("java", "-Xmx{memory_mb}m", "-Xss64m", "-XX:+UseSerialGC", "-XX:-UsePerfData")
#: Assertions on: MultiPL-E's tests are ``assert`` statements (its harness and SandboxFusion
#: run ``java -ea``); without, every such test would pass.
_JAVA_RUN = (*_JVM, "-ea", "-DONLINE_JUDGE=true", "-cp", _JAVA_CLASS_PATH, "{main}")
#: JUnit 5's console launcher (Debian's junit5), as SandboxFusion's ``junit`` mode runs it:
#: the test classes compiled against it, then every test found on the class path run.
_JUNIT = "/usr/share/java/junit-platform-console-standalone.jar"
_JUNIT_RUN = (
    "java",
    "-Xmx{memory_mb}m",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-jar",
    _JUNIT,
    *("--class-path", ".", "--scan-class-path", "--disable-banner"),
)
#: javac, scalac and Kotlin's compiler are JVMs themselves: a small heap, one GC thread and C1
#: alone start them fastest.
_COMPILER_JVM = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")
#: The same, passed through ``javac``'s and ``scalac``'s launchers (``-J``).
_JVM_COMPILER = (*(f"-J{flag}" for flag in _COMPILER_JVM), "-encoding", "UTF-8")
_JAVAC = ("javac", *_JVM_COMPILER, "-cp", _JAVA_CLASS_PATH, "-d", ".", "{source}")
#: Debian's Scala 2.11, on the system JDK. The program runs on the JVM directly with Scala's
#: library, as ``scala`` would run it but without the shell script in between (whose child a
#: time limit would kill unmeasured). The file is named, and run, after its first ``object``,
#: as SandboxFusion finds it.
_SCALA_OBJECT = r"\bobject\s+(\w+)"
_SCALAC = ("scalac", *_JVM_COMPILER, "-d", ".", "{source}")
_SCALA_LIBRARY = "/usr/share/java/scala-library.jar"
_SCALA_RUN = (*_JVM, "-cp", f".:{_SCALA_LIBRARY}", "{main}")
#: Debian's Kotlin 1.3, on the system JDK. SandboxFusion runs the script with ``kotlin``, which
#: compiles it on every run: here it is compiled once (a compile error is one, and the compile
#: cache keeps the classes) and run on the JVM with a launcher of the engine's, since a
#: compiled script is a class without ``main``. The compiler runs on the JVM directly, as
#: ``kotlinc`` would start it but without the deprecated ``-noverify`` that makes it warn.
_KOTLIN = "/usr/share/kotlin/kotlinc/lib"
_KOTLIN_SCRIPT_LAUNCHER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "kotlin", "RunScript.kt"
)
_KOTLINC = (
    *("java", *_COMPILER_JVM),
    *("-cp", f"{_KOTLIN}/kotlin-preloader.jar", "org.jetbrains.kotlin.preloading.Preloader"),
    *("-cp", f"{_KOTLIN}/kotlin-compiler.jar", "org.jetbrains.kotlin.cli.jvm.K2JVMCompiler"),
)
_KOTLIN_SCRIPT_RUN = (
    *_JVM,
    *("-cp", f".:{_KOTLIN}/kotlin-stdlib.jar:{_KOTLIN}/kotlin-script-runtime.jar", "RunScript"),
)
#: C# as ``dotnet run`` builds it (SandboxFusion's runner): a Debug build, so ``DEBUG`` and
#: ``TRACE`` are defined and ``Debug.Assert`` is compiled in, and a failed assertion ends the
#: program with status 134, which Mono's own listener would only log (``csharp/``). A program
#: can still take the listener away (its config, ``Trace.Listeners``), as it can under .NET.
_CSHARP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csharp")
_MCS = "/usr/bin/mcs"  # the compile runs through the shell: ``needs`` names the compiler
_CSHARP_COMPILE = (
    "/bin/sh",
    "-c",
    f'{_MCS} -optimize+ -define:DEBUG -define:TRACE -out:main.exe "$1" "$2" && cp "$3" .',
    "mcs",
    "{source}",
    os.path.join(_CSHARP, "A2eFailFast.cs"),
    os.path.join(_CSHARP, "main.exe.config"),
)
#: SQLite's shell on an empty database in memory (``.open`` or ``ATTACH`` reads one from
#: ``files``), stopping at the first error with status 1, as a failed statement should fail the
#: run. Arguments are what the shell makes of them: more SQL or dot-commands, run after the
#: program. There is no parse-only mode: a syntax error fails the run, after the statements
#: before it ran.
_SQLITE_RUN = ("sqlite3", "-batch", "-bail", ":memory:", ".read {source}")
#: Without type-checking (``--noCheck``, TypeScript 5.5 and later), as SandboxFusion runs it
#: (``tsx``): HumanEval-X's and MultiPL-E's TypeScript does not type-check cleanly, and
#: ``console.assert(1 === 2)`` must run and say so, not fail to compile. Syntax errors still
#: stop the compile.
_TSC = (
    "tsc",
    "--noCheck",
    "--target",
    "es2022",
    "--module",
    "commonjs",
    "--esModuleInterop",
    "--skipLibCheck",
    "--types",
    "node",
    "--typeRoots",
    "{node_modules}/@types",
    "--outDir",
    ".",
    "{source}",
)
_NODE_RUN = ("node", "--max-old-space-size={memory_mb}", "main.js")
_LODASH = (("lodash", "/usr/share/nodejs/lodash"),)
#: MultiPL-E's Perl tests compare with these (libtest-deep-perl, libdata-compare-perl).
_PERL_TESTS = (
    ("Test::Deep", "/usr/share/perl5/Test/Deep.pm"),
    ("Data::Compare", "/usr/share/perl5/Data/Compare.pm"),
)
_OPENSSL_HEADERS = (("OpenSSL", "/usr/include/openssl/md5.h"),)
#: Debian's packaged modules (node-lodash: MultiPL-E's and HumanEval-X's JavaScript and
#: TypeScript tests require it), for a Node.js that does not look there itself (NodeSource's).
_NODE_ENV = {"NODE_PATH": "/usr/share/nodejs"}
#: What a program that includes OpenSSL's headers links with (HumanEval-X's ``string_to_md5``;
#: SandboxFusion links them whenever the host has them).
_OPENSSL = {"openssl/": ("-lssl", "-lcrypto")}


#: Go's build: no cgo (its directives would hand flags of the program's choosing to gcc), no
#: modules (nothing to fetch), and a build cache of the step's own (nothing a program wrote).
_GO_ENV = {
    "CGO_ENABLED": "0",
    "GO111MODULE": "off",
    "GOCACHE": "{dir}/.gocache",
    "GOPATH": "{dir}/.gopath",
    "GOMEMLIMIT": "{memory_mb}MiB",
}
_GO_OUT_OF_MEMORY = ("runtime: out of memory",)


#: LuaUnit's interface as MultiPL-E's Lua tests use it (``require('luaunit')``), shipped with
#: the engine: no registry ``.ci/run`` reaches carries LuaUnit.
_LUAUNIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lua", "luaunit.lua")


#: Racket reads the whole module, as its module reader would, without running or expanding
#: it: a program that does not read is a compile error (an unclosed paren, mostly).
_RACKET_READ_ALL = (
    "(define f (vector-ref (current-command-line-arguments) 0))"
    " (parameterize ([read-accept-reader #t] [read-accept-lang #t])"
    " (with-input-from-file f (lambda () (port-count-lines! (current-input-port))"
    " (let loop () (unless (eof-object? (read-syntax f)) (loop))))))"
)


def _script(
    name: str,
    source: str,
    parse: tuple[str, ...],
    install: str,
    version: str,
    runtime: tuple[tuple[str, str], ...] = (),
    env: Mapping[str, str] | None = None,
) -> Language:
    """A language run as ``<name> <source>``, parsed first by ``parse`` on the source."""
    return Language(
        name,
        source,
        (name, "{source}"),
        syntax_check=(*parse, "{source}"),
        install=install,
        version=(name, version),
        runtime=runtime,
        env=env or {},
    )


LANGUAGES: dict[str, Language] = {
    language.name: language
    for language in (
        # The engine's own interpreter: the one the sandbox already lets workers read.
        Language(
            "python",
            "main.py",
            (sys.executable, "{source}"),
            version=(sys.executable, "--version"),
            out_of_memory=("MemoryError",),
            warm=True,
            # BigCodeBench-style tasks: the engine's ``datastack`` extra installs them.
            runtime=tuple((name, f"module:{name}") for name in ("numpy", "pandas", "scipy")),
        ),
        Language(
            "bash",
            "main.sh",
            ("/bin/bash", "{source}"),
            syntax_check=("/bin/bash", "-n", "{source}"),
            install="bash",
            version=("bash", "--version"),
        ),
        Language(
            "c",
            "main.c",
            ("./main",),
            compile=(
                "gcc",
                *("-std=gnu11", "-O2", "-pipe", "-DONLINE_JUDGE"),
                *("-o", "main", "{source}", "-lm"),
            ),
            outputs=("main",),
            libraries=_OPENSSL,
            runtime=_OPENSSL_HEADERS,
            source_diagnostic=_AT_LINE_AND_COLUMN,
            install="gcc",
            version=("gcc", "--version"),
        ),
        Language(
            "cpp",
            "main.cpp",
            ("./main",),
            compile=(
                "g++",
                *("-std=gnu++17", "-O2", "-pipe", "-DONLINE_JUDGE"),
                *("-o", "main", "{source}"),
            ),
            outputs=("main",),
            precompile=("bits/stdc++.h", "iostream"),
            libraries=_OPENSSL,
            runtime=_OPENSSL_HEADERS,
            source_diagnostic=_AT_LINE_AND_COLUMN,
            install="g++",
            version=("g++", "--version"),
            out_of_memory=("std::bad_alloc",),
        ),
        Language(
            "java",
            "{main}.java",
            _JAVA_RUN,
            compile=_JAVAC,
            outputs=("*.class",),
            source_diagnostic=r"^{source}:\d+: error: ",
            runtime=(("javatuples", "/usr/share/java/javatuples.jar"),),
            install="default-jdk-headless",
            version=("javac", "-version"),
            out_of_memory=("java.lang.OutOfMemoryError",),
            main_pattern=_JAVA_PUBLIC_CLASS,
            default_main="Main",
        ),
        Language(
            "nodejs",
            "main.js",
            _NODE_RUN,
            syntax_check=("node", "--check", "main.js"),
            env=_NODE_ENV,
            runtime=_LODASH,
            install="nodejs",
            version=("node", "--version"),
            out_of_memory=("JavaScript heap out of memory",),
        ),
        Language(
            "typescript",
            "main.ts",
            _NODE_RUN,
            compile=_TSC,
            outputs=("main.js",),
            env=_NODE_ENV,
            runtime=_LODASH,
            install="nodejs, and the TypeScript compiler: npm install -g typescript @types/node",
            version=("tsc", "--version"),
            out_of_memory=("JavaScript heap out of memory",),
        ),
        Language(
            "jest",
            "main.test.ts",
            # SandboxFusion runs the test file with Jest through Babel's TypeScript preset:
            # here it is compiled as ``typescript`` is (not type-checked), then Jest runs it,
            # writing each test's result to jest-report.json, as SandboxFusion's reporter does.
            (
                *("jest", "--ci", "--config", '{{"rootDir": "."}}'),
                *("--cache=false", "--watchman=false", "--json"),
                *("--outputFile=jest-report.json", "main.test.js"),
            ),
            compile=_TSC,
            outputs=("main.test.js",),
            env=_NODE_ENV,
            runtime=_LODASH,
            install="nodejs, TypeScript and Jest: npm install -g typescript @types/node jest@29",
            version=("jest", "--version"),
            out_of_memory=("JavaScript heap out of memory",),
            test_runner=True,
        ),
        Language(
            "rust",
            "main.rs",
            ("./main",),
            compile=(
                "rustc",
                *("--edition", "2021", "-O", "--cfg", "ONLINE_JUDGE"),
                *("-o", "main", "{source}"),
            ),
            outputs=("main",),
            source_diagnostic=r"^ *--> {source}:\d+:\d+$",
            install="rustc",
            version=("rustc", "--version"),
            out_of_memory=("memory allocation of",),
        ),
        Language(
            "go",
            "main.go",
            ("./main",),
            compile=("go", "build", "-o", "main", "{source}"),
            outputs=("main",),
            source_diagnostic=_AT_LINE_AND_COLUMN,
            install="golang-go",
            version=("go", "version"),
            env=_GO_ENV,
            out_of_memory=_GO_OUT_OF_MEMORY,
        ),
        Language(
            "go_test",
            "main_test.go",
            # SandboxFusion runs ``go test`` on the file; the test binary built apart and run
            # gives the same verdict (exit 1 on a failed test), and the compile cache keeps it.
            ("./main.test",),
            compile=("go", "test", "-c", "-o", "main.test", "{source}"),
            outputs=("main.test",),
            install="golang-go",
            version=("go", "version"),
            env=_GO_ENV,
            out_of_memory=_GO_OUT_OF_MEMORY,
            test_runner=True,
        ),
        _script(
            "perl", "main.pl", ("perl", "-c"), install="perl", version="-v", runtime=_PERL_TESTS
        ),
        _script("ruby", "main.rb", ("ruby", "-c"), install="ruby", version="--version"),
        _script(
            "lua",
            "main.lua",
            ("luac", "-p"),
            install="lua5.4",
            version="-v",
            runtime=(("luaunit", _LUAUNIT),),
            env={"LUA_PATH": f"{os.path.dirname(_LUAUNIT)}/?.lua;;"},
        ),
        Language(
            "racket",
            "main.rkt",
            ("racket", "{source}"),
            syntax_check=("racket", "-l", "racket/base", "-e", _RACKET_READ_ALL, "{source}"),
            install="racket",
            version=("racket", "--version"),
            runtime=(("rackunit", "/usr/share/racket/pkgs/rackunit-lib"),),
            out_of_memory=("out of memory",),
        ),
        Language(
            "pytest",
            "test_main.py",
            (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "{source}"),
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            needs="module:pytest",
            install="pytest (pip install pytest, where the engine is installed)",
            test_runner=True,
            out_of_memory=("MemoryError",),
        ),
        Language(
            "junit",
            "{main}.java",
            _JUNIT_RUN,
            compile=tuple(f".:{_JUNIT}" if part == _JAVA_CLASS_PATH else part for part in _JAVAC),
            outputs=("*.class",),
            needs=_JUNIT,
            install="default-jdk-headless junit5",
            out_of_memory=("java.lang.OutOfMemoryError",),
            main_pattern=_JAVA_PUBLIC_CLASS,
            default_main="Main",
            test_runner=True,
        ),
        Language(
            "verilog",
            "main.sv",
            ("vvp", "-n", "test.vvp"),
            # As SandboxFusion compiles it, after VerilogEval's harness: the top module is the
            # test bench, ``tb``, which drives the design and says how it went.
            compile=(
                "iverilog",
                *("-Wall", "-Winfloop", "-Wno-timescale", "-g2012", "-s", "tb"),
                *("-o", "test.vvp", "{source}"),
            ),
            outputs=("test.vvp",),
            install="iverilog",
            version=("iverilog", "-V"),
            test_runner=True,
        ),
        Language(
            "php",
            "main.php",
            ("php", "-f", "{source}", "--"),
            syntax_check=("php", "-l", "{source}"),
            opening="<?php",
            install="php-cli",
            version=("php", "--version"),
            out_of_memory=("Allowed memory size", "Out of memory"),
        ),
        Language(
            "r",
            "main.R",
            ("Rscript", "{source}"),
            syntax_check=("Rscript", "-e", "invisible(parse(commandArgs(TRUE)[1]))", "{source}"),
            install="r-base-core",
            version=("Rscript", "--version"),
            out_of_memory=("cannot allocate vector",),
        ),
        Language(
            "d",
            "main.d",
            ("./main",),
            # MultiPL-E's D tests are unittest blocks: run instead of main when there are any
            # (druntime's test-or-main), as under SandboxFusion's D_ut (dmd -unittest).
            compile=("gdc", "-O2", "-funittest", "-o", "main", "{source}"),
            outputs=("main",),
            install="gdc",
            version=("gdc", "--version"),
            out_of_memory=("OutOfMemoryError",),
        ),
        Language(
            "scala",
            "{main}.scala",
            _SCALA_RUN,
            compile=_SCALAC,
            outputs=("*.class",),
            needs=_SCALA_LIBRARY,
            install="scala",
            version=("scalac", "-version"),
            out_of_memory=("java.lang.OutOfMemoryError",),
            main_pattern=_SCALA_OBJECT,
            default_main="Main",
        ),
        Language(
            "kotlin_script",
            # The script's class is named after its file: ``Main``, which the launcher starts.
            "main.kts",
            _KOTLIN_SCRIPT_RUN,
            compile=(*_KOTLINC, "-d", ".", "{source}", _KOTLIN_SCRIPT_LAUNCHER),
            outputs=("*.class",),
            needs=f"{_KOTLIN}/kotlin-compiler.jar",
            install="kotlin",
            version=(*_KOTLINC, "-version"),
            out_of_memory=("java.lang.OutOfMemoryError",),
        ),
        Language(
            "sql",
            "main.sql",
            _SQLITE_RUN,
            install="sqlite3",
            version=("sqlite3", "-version"),
            out_of_memory=("out of memory",),
        ),
        Language(
            "csharp",
            "main.cs",
            ("mono", "main.exe"),
            compile=_CSHARP_COMPILE,
            outputs=("main.exe", "main.exe.config"),
            needs=_MCS,
            install="mono-mcs mono-runtime",
            version=("mono", "--version"),
            out_of_memory=("OutOfMemoryException",),
        ),
    )
}
