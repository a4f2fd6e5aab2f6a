"""Every language ``run_code`` serves, for real: its toolchain inside the sandbox, a program
reading stdin and its arguments, a compile error, a runtime error, a time limit and a memory
limit. ``.ci/run`` installs each toolchain; a missing one fails here rather than skipping."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.tools._languages import LANGUAGES, Language

#: Reads a word from stdin and prints it with its first argument: "<arg> <word>".
ECHO = {
    "python": "import sys\nprint(sys.argv[1], input())",
    "bash": 'read word\necho "$1 $word"',
    "c": '#include <stdio.h>\nint main(int c, char **v) {\n  char w[64];\n  scanf("%63s", w);\n'
    '  printf("%s %s\\n", v[1], w);\n  return 0;\n}',
    "cpp": "#include <iostream>\n#include <string>\nint main(int c, char **v) {\n"
    '  std::string w;\n  std::cin >> w;\n  std::cout << v[1] << " " << w << std::endl;\n}',
    "java": "import java.util.Scanner;\npublic class Echo {\n  public static void main(String[] a) {"
    '\n    System.out.println(a[0] + " " + new Scanner(System.in).next());\n  }\n}',
    "nodejs": 'const w = require("fs").readFileSync(0, "utf8").trim();\n'
    'console.log(process.argv[2] + " " + w);',
    "typescript": 'import * as fs from "fs";\nconst w: string = fs.readFileSync(0, "utf8").trim();\n'
    'console.log(process.argv[2] + " " + w);',
    "rust": "use std::io::Read;\nfn main() {\n  let mut w = String::new();\n"
    "  std::io::stdin().read_to_string(&mut w).unwrap();\n"
    '  println!("{} {}", std::env::args().nth(1).unwrap(), w.trim());\n}',
    "go": 'package main\nimport ("fmt"; "os")\nfunc main() {\n  var w string\n  fmt.Scan(&w)\n'
    "  fmt.Println(os.Args[1], w)\n}",
    "perl": 'my $w = <STDIN>;\nchomp $w;\nprint "$ARGV[0] $w\\n";',
    "ruby": 'puts "#{ARGV[0]} #{STDIN.read.strip}"',
    "lua": 'print(arg[1] .. " " .. io.read("*l"))',
    "php": '$w = trim(fgets(STDIN));\necho $argv[1] . " " . $w . "\\n";',
    "r": 'w <- readLines(file("stdin"), n = 1)\ncat(paste(commandArgs(TRUE)[1], w), "\\n", sep = "")',
    "d": "import std.stdio, std.string;\n"
    'void main(string[] a) { writeln(a[1], " ", readln().strip()); }',
    "csharp": "using System;\nclass P { static void Main(string[] a) {\n"
    '  Console.WriteLine(a[0] + " " + Console.ReadLine()); } }',
    "racket": "#lang racket\n(define w (read-line))\n"
    '(displayln (string-append (vector-ref (current-command-line-arguments) 0) " " w))',
    "scala": "object Main {\n  def main(args: Array[String]): Unit =\n"
    '    println(args(0) + " " + scala.io.StdIn.readLine())\n}',
    "kotlin_script": 'println(args[0] + " " + readLine())',
    # SQL has no arguments of its own: the shell runs them after the program (ECHO_ARGUMENTS).
    "sql": "CREATE TABLE w(x TEXT);\n.import /dev/stdin w",
}
#: What each ECHO program is given as arguments, where not ``["hello"]``.
ECHO_ARGUMENTS = {"sql": ["SELECT 'hello ' || x FROM w;"]}
#: Does not compile (or, interpreted, does not parse).
BROKEN = {
    "python": "def f(:\n",
    "bash": "if then fi (",
    "c": "int main() { return undefined_name; }",
    "cpp": "int main() { std::vector<int> v; }",
    "java": "public class Main { void f() { int x = ; } }",
    "nodejs": "function (",
    "typescript": "const x: number = ;",
    "rust": 'fn main() { let x: u32 = "s"; }',
    "go": "package main\nfunc main() { undefined() }",
    "perl": "my $x = ;",
    "ruby": "def f(",
    "lua": "local = 1",
    "php": "$x = ;",
    "r": "f <- function( {",
    "d": "void main() { int x = ; }",
    "csharp": "class P { static void Main() { int x = ; } }",
    "racket": "#lang racket\n(define (f x\n",
    "scala": "object Main { def main(args: Array[String]): Unit = { val x = } }",
    "kotlin_script": "val x = ",
    "sql": "SELEC 1;",
}
#: Fails while it runs, with a non-zero exit.
CRASHING = {
    "python": "raise ValueError('boom')",
    "bash": "echo partial; exit 7",
    "c": "#include <stdlib.h>\nint main() { abort(); }",
    "cpp": '#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }',
    "java": 'public class Main { public static void main(String[] a) { throw new RuntimeException("boom"); } }',
    "nodejs": "throw new Error('boom');",
    "typescript": "throw new Error('boom');",
    "rust": 'fn main() { panic!("boom"); }',
    "go": 'package main\nfunc main() { panic("boom") }',
    "perl": "die 'boom';",
    "ruby": "raise 'boom'",
    "lua": "error('boom')",
    "php": "throw new Exception('boom');",
    "r": "stop('boom')",
    "d": 'void main() { throw new Exception("boom"); }',
    "csharp": 'class P { static void Main() { throw new System.Exception("boom"); } }',
    "racket": '#lang racket\n(error "boom")',
    "scala": 'object Main { def main(args: Array[String]): Unit = throw new Exception("boom") }',
    "kotlin_script": 'throw Exception("boom")',
    "sql": "CREATE TABLE t(x CHECK (x <> 'boom'));\nINSERT INTO t VALUES ('boom');",
}
#: Never ends on its own.
SPINNING = {
    "python": "while True:\n    pass",
    "bash": "while true; do :; done",
    "c": "int main() { volatile int x = 0; for (;;) x++; }",
    "cpp": "int main() { volatile int x = 0; for (;;) x++; }",
    "java": "public class Main { public static void main(String[] a) { while (true) {} } }",
    "nodejs": "for (;;) {}",
    "typescript": "for (;;) {}",
    "rust": "fn main() {\n  let mut x: u64 = 0;\n"
    "  loop { unsafe { std::ptr::write_volatile(&mut x, x.wrapping_add(1)) } }\n}",
    "go": "package main\nfunc main() { for {} }",
    "perl": "while (1) {}",
    "ruby": "loop {}",
    "lua": "while true do end",
    "php": "while (true) {}",
    "r": "repeat {}",
    "d": "void main() { for (;;) {} }",
    "csharp": "class P { static void Main() { for (;;) {} } }",
    "racket": "#lang racket\n(let loop () (loop))",
    "scala": "object Main { def main(args: Array[String]): Unit = while (true) {} }",
    "kotlin_script": "while (true) {}",
    "sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;",
}
#: Holds ever more memory, each megabyte touched.
GREEDY = {
    "python": "held = []\nwhile True:\n    held.append(bytearray(1 << 20))",
    "bash": 'x=a; while true; do x="$x$x"; done',
    "c": "#include <stdlib.h>\n#include <string.h>\nint main() {\n"
    "  for (;;) { char *p = malloc(1 << 20); if (!p) return 3; memset(p, 1, 1 << 20); }\n}",
    "cpp": "#include <vector>\nint main() {\n  std::vector<std::vector<char>> v;\n"
    "  for (;;) v.emplace_back(1 << 20, 1);\n}",
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
    "  List<byte[]> l = new ArrayList<>(); for (;;) l.add(new byte[1 << 20]); } }",
    "nodejs": "const l = []; for (;;) l.push(new Array(100000).fill(1.5));",
    "typescript": "const l: number[][] = []; for (;;) l.push(new Array(100000).fill(1.5));",
    "rust": "fn main() { let mut v: Vec<Vec<u8>> = Vec::new(); loop { v.push(vec![1u8; 1 << 20]); } }",
    "go": "package main\nfunc main() {\n  var l [][]byte\n  for {\n    b := make([]byte, 1<<20)\n"
    "    for i := range b { b[i] = 1 }\n    l = append(l, b)\n  }\n}",
    "perl": 'my @l; while (1) { push @l, "x" x (1 << 20); }',
    "ruby": 'l = []; loop { l << "x" * (1 << 20) }',
    "lua": 'local l = {} while true do l[#l + 1] = string.rep("x", 1 << 20) .. #l end',
    "php": '$l = []; while (true) { $l[] = str_repeat("x", 1 << 20) . count($l); }',
    "r": "l <- list()\nrepeat l[[length(l) + 1]] <- runif(131072)",
    "d": "void main() { ubyte[][] l; for (;;) { auto b = new ubyte[1 << 20]; b[] = 1; l ~= b; } }",
    "csharp": "using System.Collections.Generic;\nclass P { static void Main() {\n"
    "  var l = new List<byte[]>(); for (;;) { var b = new byte[1 << 20];\n"
    "  for (int i = 0; i < b.Length; i += 4096) b[i] = 1; l.Add(b); } } }",
    "racket": "#lang racket\n(let loop ([held '()]) (loop (cons (make-bytes 1048576 1) held)))",
    "scala": "object Main { def main(args: Array[String]): Unit = {\n"
    "  val l = scala.collection.mutable.ArrayBuffer[Array[Byte]]()\n"
    "  while (true) l += Array.fill[Byte](1 << 20)(1) } }",
    "kotlin_script": "val l = ArrayList<ByteArray>()\nwhile (true) l.add(ByteArray(1 shl 20) { 1 })",
    "sql": "CREATE TABLE t(b);\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)\n"
    "INSERT INTO t SELECT randomblob(1048576) FROM c;",
}


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(config=EngineConfig(prefork=2, max_workers=2)) as engine:
        yield ToolAPI(engine.connect())


def _run(tools: ToolAPI, language: str, code: str, **arguments: Any) -> dict[str, Any]:
    result = tools.call(
        tool_name="run_code",
        arguments={"language": language, "code": code, **arguments},
        timeout=60,
    )
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


#: The languages whose code is a program (the others are test runners' modes, below).
PROGRAMS = sorted(name for name, language in LANGUAGES.items() if not language.test_runner)


def test_every_language_has_each_kind_of_program() -> None:
    for programs in (ECHO, BROKEN, CRASHING, SPINNING, GREEDY):
        assert set(programs) == set(PROGRAMS)


PYTEST_FILE = (
    "import pytest\n\ndef add(a, b):\n    return a + b\n\n"
    "def test_adds():\n    assert add(1, 2) == 3\n\n"
    "@pytest.mark.parametrize('a', [1, 2])\ndef test_positive(a):\n    assert add(a, 0) > 0\n"
)


JUNIT_CLASS = (
    "import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\n"
    "public class AddTest {\n  int add(int a, int b) { return a + b; }\n"
    "  @Test void adds() { assertEquals(3, add(1, 2)); }\n"
    "  @Test void zero() { assertEquals(0, add(0, 0)); }\n"
    "  EXTRA\n}\n"
)


def test_junit_runs_a_test_class_as_sandbox_fusion_does(tools: ToolAPI) -> None:
    assert LANGUAGES["junit"].missing() is None  # .ci/run installs junit5
    passed = _run(tools, "junit", JUNIT_CLASS.replace("EXTRA", ""))
    run = passed["run_result"]
    assert passed["status"] == "Success" and "2 tests successful" in run["stdout"], run
    wrong = "@Test void wrong() { assertEquals(4, add(1, 2)); }"
    failing = _run(tools, "junit", JUNIT_CLASS.replace("EXTRA", wrong))
    run = failing["run_result"]
    assert failing["status"] == "Failed" and run["return_code"] == 1
    assert "1 tests failed" in run["stdout"], run
    broken = _run(tools, "junit", JUNIT_CLASS.replace("EXTRA", "int x = ;"))
    assert broken["status"] == "Failed" and broken["run_result"] is None
    spins = "@Test void spins() { for (;;) {} }"
    spun = _run(tools, "junit", JUNIT_CLASS.replace("EXTRA", spins), run_timeout=3)
    assert spun["run_result"]["status"] == "TimeLimitExceeded", spun["run_result"]
    greedy = (
        "@Test void greedy() { java.util.List<byte[]> l = new java.util.ArrayList<>();\n"
        "    for (;;) l.add(new byte[1 << 20]); }"
    )
    grew = _run(tools, "junit", JUNIT_CLASS.replace("EXTRA", greedy), memory_mb=128)
    assert grew["run_result"]["status"] == "MemoryLimitExceeded", grew["run_result"]


def test_verilog_runs_its_test_bench_as_sandbox_fusion_does(tools: ToolAPI) -> None:
    def bench(body: str) -> str:
        return f"module tb;\n  initial begin\n    {body}\n  end\nendmodule\n"

    added = _run(tools, "verilog", bench('$display("%0d", 1 + 1);\n    $finish;'))
    assert added["status"] == "Success" and added["run_result"]["stdout"] == "2\n", added
    fatal = _run(tools, "verilog", bench('$fatal(1, "boom");'))["run_result"]
    assert fatal["return_code"] == 1 and "boom" in fatal["stdout"] + fatal["stderr"], fatal
    broken = _run(tools, "verilog", bench("x = ;"))
    assert broken["status"] == "Failed" and broken["compile_result"]["return_code"] != 0
    spun = _run(tools, "verilog", bench("forever #1;"), run_timeout=1)
    assert spun["run_result"]["status"] == "TimeLimitExceeded"
    # A memory of 2^20 words of 1024 bits, every word written.
    greedy = (
        "module tb;\n  reg [1023:0] big [0:1048575];\n  integer i;\n  initial begin\n"
        "    for (i = 0; i < 1048576; i = i + 1) big[i] = ~0;\n    $finish;\n  end\nendmodule\n"
    )
    grew = _run(tools, "verilog", greedy, memory_mb=64, run_timeout=20)
    assert grew["run_result"]["status"] == "MemoryLimitExceeded", grew["run_result"]


#: MultiPL-E's Go: a test package of its own, the standard library's ``testing`` only.
GO_TEST_FILE = (
    'package add_test\n\nimport "testing"\n\nfunc add(a, b int) int { return a + b }\n\n'
    'func TestAdd(t *testing.T) {\n  if add(1, 2) != 3 { t.Fatal("1 + 2") }\n}\nEXTRA\n'
)


def test_go_test_runs_a_test_file_as_sandbox_fusion_does(tools: ToolAPI) -> None:
    passed = _run(tools, "go_test", GO_TEST_FILE.replace("EXTRA", ""))
    assert passed["status"] == "Success" and passed["run_result"]["stdout"] == "PASS\n", passed
    wrong = 'func TestWrong(t *testing.T) {\n  t.Errorf("add(1, 1) = %d", add(1, 1))\n}'
    failing = _run(tools, "go_test", GO_TEST_FILE.replace("EXTRA", wrong))
    run = failing["run_result"]
    assert failing["status"] == "Failed" and run["return_code"] == 1
    assert "--- FAIL: TestWrong" in run["stdout"] and "add(1, 1) = 2" in run["stdout"], run
    broken = _run(tools, "go_test", GO_TEST_FILE.replace("EXTRA", "func x( {"))
    assert broken["status"] == "Failed" and broken["run_result"] is None
    spins = "func TestSpins(t *testing.T) {\n  for {}\n}"
    spun = _run(tools, "go_test", GO_TEST_FILE.replace("EXTRA", spins), run_timeout=1)
    assert spun["run_result"]["status"] == "TimeLimitExceeded"
    greedy = (
        "var held [][]byte\nfunc TestGreedy(t *testing.T) {\n  for {\n"
        "    b := make([]byte, 1<<20)\n    for i := range b { b[i] = 1 }\n"
        "    held = append(held, b)\n  }\n}"
    )
    grew = _run(tools, "go_test", GO_TEST_FILE.replace("EXTRA", greedy), memory_mb=64)
    assert grew["run_result"]["status"] == "MemoryLimitExceeded", grew["run_result"]


JEST_FILE = (
    "function add(a: number, b: number): number {\n  return a + b;\n}\n"
    'describe("add", () => {\n  test("adds", () => {\n    expect(add(1, 2)).toBe(3);\n  });\nEXTRA\n});\n'
)


def test_jest_runs_a_test_file_as_sandbox_fusion_does(tools: ToolAPI) -> None:
    passed = _run(tools, "jest", JEST_FILE.replace("EXTRA", ""))
    run = passed["run_result"]
    assert passed["status"] == "Success", passed
    assert "Tests:       1 passed, 1 total" in run["stderr"], run
    wrong = '  test("wrong", () => {\n    expect(add(1, 1)).toBe(3);\n  });'
    failing = _run(tools, "jest", JEST_FILE.replace("EXTRA", wrong))
    run = failing["run_result"]
    assert failing["status"] == "Failed" and run["return_code"] == 1, run
    assert "1 failed, 1 passed, 2 total" in run["stderr"] and "Received: 2" in run["stderr"], run
    broken = _run(tools, "jest", JEST_FILE.replace("EXTRA", "  const x: number = ;"))
    assert broken["status"] == "Failed" and broken["run_result"] is None
    spins = '  test("spins", () => {\n    for (;;) {}\n  });'
    spun = _run(tools, "jest", JEST_FILE.replace("EXTRA", spins), run_timeout=2)
    assert spun["run_result"]["status"] == "TimeLimitExceeded"
    greedy = (
        '  test("greedy", () => {\n    const l: number[][] = [];\n'
        "    for (;;) l.push(new Array(100000).fill(1.5));\n  });"
    )
    grew = _run(tools, "jest", JEST_FILE.replace("EXTRA", greedy), memory_mb=256, run_timeout=20)
    assert grew["run_result"]["status"] == "MemoryLimitExceeded", grew["run_result"]


def test_csharp_asserts_end_the_program_as_dotnet_runs_it(tools: ToolAPI) -> None:
    """SandboxFusion runs C# with ``dotnet run``, a Debug build, where a failed ``Debug.Assert``
    ends the program: HumanEval's, MultiPL-E's and MBXP's C# tests assert that way, and under
    Mono's own listener every answer, right or wrong, would pass them."""
    head = "using System;\nusing System.Diagnostics;\nclass P { static void Main() {\n"
    failed = _run(
        tools, "csharp", head + 'Console.WriteLine("before");\nDebug.Assert(1 == 2);\n} }'
    )
    run = failed["run_result"]
    assert failed["status"] == "Failed" and run["return_code"] == 134, run
    assert run["stdout"] == "before\n" and "Assertion failed." in run["stderr"], run
    traced = _run(tools, "csharp", head + "Trace.Assert(false);\n} }")
    assert traced["status"] == "Failed", traced
    held = _run(
        tools,
        "csharp",
        head + 'Debug.Assert(2 > 1);\n#if DEBUG\nConsole.Write("debug");\n#endif\n} }',
    )
    assert held["status"] == "Success" and held["run_result"]["stdout"] == "debug", held
    # a program's own types named as the listener's are not the listener's
    named = (
        "using System.Diagnostics;\nclass Console {}\nclass StackTrace {}\nclass Environment {}\n"
    )
    shadowed = _run(
        tools, "csharp", named + "class P { static void Main() { Debug.Assert(false); } }"
    )
    assert shadowed["status"] == "Failed" and shadowed["run_result"]["return_code"] == 134, shadowed


def test_pytest_runs_a_test_file_as_sandbox_fusion_does(tools: ToolAPI) -> None:
    passed = _run(tools, "pytest", PYTEST_FILE)
    run = passed["run_result"]
    assert passed["status"] == "Success" and "3 passed" in run["stdout"], run
    failing = _run(
        tools, "pytest", PYTEST_FILE + "\ndef test_wrong():\n    assert add(1, 1) == 3\n"
    )
    run = failing["run_result"]
    assert failing["status"] == "Failed" and run["return_code"] == 1
    assert "1 failed, 3 passed" in run["stdout"], run
    for code in ("def test_broken(:\n", "x = 1\n"):  # a collection error; no tests
        assert _run(tools, "pytest", code)["status"] == "Failed"
    spun = _run(
        tools, "pytest", "def test_spins():\n    while True:\n        pass\n", run_timeout=1
    )
    assert spun["run_result"]["status"] == "TimeLimitExceeded"
    greedy = "def test_greedy():\n    held = []\n    while True:\n        held.append(bytearray(1 << 20))\n"
    grew = _run(tools, "pytest", greedy, memory_mb=128, run_timeout=20)
    assert grew["run_result"]["status"] == "MemoryLimitExceeded", grew["run_result"]


def test_sql_runs_in_sqlites_shell_on_the_databases_it_is_given(
    tools: ToolAPI, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "data.db") as made:
        made.executescript("CREATE TABLE people(name); INSERT INTO people VALUES ('b'), ('a');")
    made.close()
    given = {"data.db": base64.b64encode((tmp_path / "data.db").read_bytes()).decode()}
    query = (
        "ATTACH 'data.db' AS d;\nSELECT group_concat(name) FROM (SELECT name FROM d.people"
        " ORDER BY name);\nINSERT INTO d.people VALUES ('c');\n.mode csv\n"
    )
    data = _run(tools, "sql", query, files=given, fetch_files=["data.db"], args=[".print end"])
    assert data["status"] == "Success", data
    assert data["run_result"]["stdout"] == "a,b\nend\n"
    (tmp_path / "back.db").write_bytes(base64.b64decode(data["files"]["data.db"]))
    with sqlite3.connect(tmp_path / "back.db") as back:
        assert back.execute("SELECT count(*) FROM people").fetchone() == (3,)
    back.close()
    # No parse-only pass: the statements before a syntax error ran, and the run failed there.
    broken = _run(tools, "sql", "SELECT 'before';\nSELEC 1;\nSELECT 'after';")
    assert broken["status"] == "Failed" and broken["run_result"]["stdout"] == "before\n"
    assert "syntax error" in broken["run_result"]["stderr"]


#: SandboxFusion's own kotlin_script tests (sandbox/tests/runners/test_kotlin_script.py): a
#: check that throws fails the run with the exception on stderr, one that holds passes.
KOTLIN_CHECK = (
    "fun minCost() : Int {\n    return 0\n}\n\nfun main() {\n    var x : Int = minCost();\n"
    "    var y : Int = {expected};\n    if (x != y) {\n"
    '        throw Exception("Exception -- test case did not pass. x = " + x)\n    }\n}\n\nmain()\n'
)


def test_kotlin_script_gets_sandbox_fusions_verdicts(tools: ToolAPI) -> None:
    held = _run(tools, "kotlin_script", KOTLIN_CHECK.replace("{expected}", "0"))
    assert held["status"] == "Success", held
    failed = _run(tools, "kotlin_script", KOTLIN_CHECK.replace("{expected}", "1"))
    assert failed["status"] == "Failed" and failed["run_result"]["status"] == "Finished"
    assert "java.lang.Exception" in failed["run_result"]["stderr"]


@pytest.mark.parametrize("language", PROGRAMS)
def test_a_program_reads_stdin_and_its_arguments(tools: ToolAPI, language: str) -> None:
    assert LANGUAGES[language].missing() is None  # .ci/run installs every toolchain
    arguments = ECHO_ARGUMENTS.get(language, ["hello"])
    data = _run(tools, language, ECHO[language], stdin="world\n", args=arguments)
    run = data["run_result"]
    assert data["status"] == "Success", data
    assert run["status"] == "Finished" and run["return_code"] == 0
    assert run["stdout"] == "hello world\n"
    assert run["execution_time"] > 0 and run["cpu_time"] >= 0
    compiled = data["compile_result"]
    assert (compiled is None) == (LANGUAGES[language].compile is None)


@pytest.mark.parametrize("language", PROGRAMS)
def test_a_compile_error_or_a_syntax_error_fails_with_the_message(
    tools: ToolAPI, language: str
) -> None:
    data = _run(tools, language, BROKEN[language])
    assert data["status"] == "Failed"
    if LANGUAGES[language].compile is not None:
        assert data["run_result"] is None
        compiled = data["compile_result"]
        assert compiled["status"] == "Finished" and compiled["return_code"] != 0
        assert compiled["stderr"] or compiled["stdout"]  # the compiler said why
    else:
        run = data["run_result"]
        assert run["status"] == "Finished" and run["return_code"] != 0 and run["stderr"]


@pytest.mark.parametrize("language", PROGRAMS)
def test_a_runtime_error_fails_with_its_exit(tools: ToolAPI, language: str) -> None:
    data = _run(tools, language, CRASHING[language])
    run = data["run_result"]
    assert data["status"] == "Failed" and run["status"] == "Finished"
    assert run["return_code"] not in (0, None)
    if language == "bash":
        assert run["return_code"] == 7 and run["stdout"] == "partial\n"
    else:
        assert "boom" in run["stderr"] or run["return_code"] < 0, run  # C's abort: a signal


@pytest.mark.parametrize("language", PROGRAMS)
def test_past_its_time_limit_a_program_is_killed(tools: ToolAPI, language: str) -> None:
    # A second: on two busy cores an interpreter's start alone (PHP's) took most of half of one.
    data = _run(tools, language, SPINNING[language], run_timeout=1.0)
    run = data["run_result"]
    assert data["status"] == "Failed"
    assert run["status"] == "TimeLimitExceeded" and run["return_code"] is None
    assert 1.0 <= run["execution_time"] < 6
    assert run["cpu_time"] > 0.1  # it did spin, rather than fail to start


@pytest.mark.parametrize("language", PROGRAMS)
def test_past_its_memory_limit_a_program_is_killed(tools: ToolAPI, language: str) -> None:
    data = _run(tools, language, GREEDY[language], memory_mb=64, run_timeout=10)
    run = data["run_result"]
    assert data["status"] == "Failed"
    assert run["status"] == "MemoryLimitExceeded", run
    assert run["return_code"] is None and run["execution_time"] < 9  # not the time limit
    assert run["peak_memory_kb"] > 64 * 1024


def test_php_code_gets_its_opening_tag_once() -> None:
    php = LANGUAGES["php"]
    assert php.source_text("echo 1;") == "<?php\necho 1;"
    assert php.source_text("\n<?php echo 1;") == "<?php echo 1;"  # nothing printed before it
    assert LANGUAGES["python"].source_text("<?php") == "<?php"


def test_a_missing_toolchain_is_named_with_what_to_install() -> None:
    language = Language("cobol", "main.cob", ("cobc-not-here", "{source}"), install="gnucobol")
    assert language.missing() == (
        "cobol needs cobc-not-here, which this host does not have; install gnucobol"
    )
    runner = Language("x", "x.py", ("/bin/sh",), needs="module:no_such_module_here")
    assert runner.missing() == (
        "x needs no_such_module_here, which the engine's interpreter does not have"
    )
    jar = Language("y", "Y.java", ("/bin/sh",), needs="/no/such.jar", install="junit5")
    assert jar.missing() == "y needs /no/such.jar, which this host does not have; install junit5"
    # A toolchain the sandbox could not read, one outside its PATH, counts as missing.
    assert Language("x", "x", ("/no/such/dir/tool",)).missing() is not None


def test_a2e_doctor_reports_each_language(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2e_engine.engine.cli import main
    from a2e_engine.tools import _languages as languages

    cobol = Language("cobol", "main.cob", ("cobc-not-here", "{source}"), install="gnucobol")
    monkeypatch.setitem(languages.LANGUAGES, "cobol", cobol)
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["languages"]
    assert report["cobol"] == {"available": False, "missing": cobol.missing()}
    for name in ("c", "cpp", "java", "go", "rust", "typescript"):
        assert report[name]["available"] and report[name]["version"] not in ("", "unknown")
    # What graded programs import, each found where .ci/run (and the datastack extra) put it.
    assert report["python"]["libraries"] == {"numpy": True, "pandas": True, "scipy": True}
    assert report["java"]["libraries"] == {"javatuples": True}
    assert report["nodejs"]["libraries"] == report["typescript"]["libraries"] == {"lodash": True}
    assert report["perl"]["libraries"] == {"Test::Deep": True, "Data::Compare": True}
    assert report["cpp"]["libraries"] == {"OpenSSL": True}
    missing = Language("x", "x", ("perl",), runtime=(("gone", "/no/such/lib"),))
    monkeypatch.setitem(languages.LANGUAGES, "x", missing)
    assert main(["doctor"]) == 0
    assert "with none; without gone" in capsys.readouterr().out


#: What a program sees of how it is compiled and run, as a judge would (docs/grading.md).
AS_JUDGED = {
    # Codeforces and AtCoder define ONLINE_JUDGE: programs read a file when it is not.
    "c": '#include <stdio.h>\nint main() {\n#ifdef ONLINE_JUDGE\n  puts("judge");\n#endif\n}',
    "cpp": "#include <cstdio>\n#include <openssl/md5.h>\nint main() {\n#ifdef ONLINE_JUDGE\n"
    '  unsigned char d[16];\n  MD5((const unsigned char *)"judge", 5, d);\n'
    '  for (int i = 0; i < 16; i++) printf("%02x", d[i]);\n  puts("");\n#endif\n}',
    # MultiPL-E's Java imports javatuples, and its tests are assert statements.
    "java": "import org.javatuples.*;\npublic class Main { public static void main(String[] a) {\n"
    '  Pair<Integer, String> p = Pair.with(1, "judge");\n'
    '  System.out.println(p.getValue1() + " " + System.getProperty("ONLINE_JUDGE"));\n'
    '  assert p.getValue0() == 2 : "assertions are on";\n} }',
    "rust": 'fn main() { if cfg!(ONLINE_JUDGE) { println!("judge"); } }',
    # Run as SandboxFusion runs it (tsx): type errors do not stop it, a failed
    # console.assert says so on stderr and the run goes on (HumanEval-X's TypeScript).
    "typescript": "console.assert(1 === 2);\nconst n: number = 'not a number';\n"
    "console.log('judge');",
}


#: What the datasets' tests import (MultiPL-E, HumanEval-X), each printing "judge".
LIBRARIES = {
    "python": "import numpy, pandas, scipy.stats\n"
    "frame = pandas.DataFrame({'x': numpy.arange(4)})\n"
    "print('judge' if frame.x.sum() == 6 and scipy.stats.norm.cdf(0) == 0.5 else 'no')",
    "nodejs": 'const _ = require("lodash");\n'
    'if (_.isEqual({a: [1, 2]}, {a: [1, 2]})) console.log("judge");',
    "typescript": 'import * as _ from "lodash";\nconsole.log(_.chunk(["judge", 1], 1)[0][0]);',
    "perl": "use Test::Deep qw(eq_deeply);\nuse Data::Compare;\n"
    'print "judge\\n" if eq_deeply([1, {a => 2}], [1, {a => 2}]) && Compare([1], [1]);',
    # MultiPL-E's Lua tests: LuaUnit (the engine's own, tools/lua/luaunit.lua).
    "lua": "lu = require('luaunit')\nfunction test_humaneval()\n"
    "  lu.assertEquals({1, {2, a = 'x'}}, {1, {2, a = 'x'}})\nend\n"
    "if lu.LuaUnit.run() == 0 then print('judge') end",
    # MultiPL-E's Racket tests: rackunit's checks.
    "racket": '#lang racket\n(require rackunit)\n(check-equal? (+ 1 1) 2)\n(displayln "judge")',
}


@pytest.mark.parametrize("language", sorted(LIBRARIES))
def test_the_libraries_graded_tests_import_are_there(tools: ToolAPI, language: str) -> None:
    run = _run(tools, language, LIBRARIES[language])["run_result"]
    assert run["stdout"].endswith("judge\n") and run["return_code"] == 0, run


#: MultiPL-E's Lua test, as it ends every problem.
LUA_TESTS = (
    "local function add(a, b) return a + b end\n"
    "lu = require('luaunit')\n\nfunction test_humaneval()\nlocal candidate = add\n"
    "    lu.assertEquals(candidate(1, 2), 3)\n    lu.assertEquals({candidate(0, 0)}, {0})\nEXTRA\nend\n\n"
    "os.exit(lu.LuaUnit.run())\n"
)


def test_lua_tests_get_luaunits_verdicts(tools: ToolAPI) -> None:
    passed = _run(tools, "lua", LUA_TESTS.replace("EXTRA", ""))
    run = passed["run_result"]
    assert passed["status"] == "Success", run
    assert run["stdout"].endswith(" seconds, 1 success, 0 failures\nOK\n"), run
    failing = _run(
        tools, "lua", LUA_TESTS.replace("EXTRA", "    lu.assertEquals(candidate(1, 1), 3)")
    )
    run = failing["run_result"]
    assert failing["status"] == "Failed" and run["return_code"] == 1, run
    assert "main.lua:8: expected: 3, actual: 2" in run["stdout"], run
    raising = _run(tools, "lua", LUA_TESTS.replace("EXTRA", "    candidate(nil, 1)"))
    run = raising["run_result"]
    assert raising["status"] == "Failed" and run["return_code"] == 1, run
    assert "Tests with errors:" in run["stdout"] and "1 error" in run["stdout"], run
    # An assertion outside any test ends the program as LuaUnit's does, with its failure on
    # stderr (SandboxFusion's own runner test, tests/runners/test_lua.py); one that holds
    # ends nothing.
    top_level = _run(tools, "lua", "lu = require('luaunit')\nlu.assertEquals(0, 0)\n")
    assert top_level["status"] == "Success", top_level
    top_level = _run(tools, "lua", "lu = require('luaunit')\nlu.assertEquals(1, 2)\n")
    run = top_level["run_result"]
    assert top_level["status"] == "Failed" and run["status"] == "Finished", top_level
    assert "main.lua:2: LuaUnit test FAILURE: expected: 2, actual: 1" in run["stderr"], run
    # An error that only mentions the prefix is an error, not a failure.
    mention = LUA_TESTS.replace("EXTRA", "    error('no LuaUnit test FAILURE: here')")
    run = _run(tools, "lua", mention)["run_result"]
    assert "1 error" in run["stdout"] and "0 failures" in run["stdout"], run


@pytest.mark.parametrize("language", sorted(AS_JUDGED))
def test_a_program_is_compiled_and_run_as_judges_do(tools: ToolAPI, language: str) -> None:
    data = _run(tools, language, AS_JUDGED[language])
    assert data["compile_result"]["return_code"] == 0, data["compile_result"]
    run = data["run_result"]
    if language == "cpp":  # linked with OpenSSL for including it (HumanEval-X's md5)
        assert run["stdout"] == "1562eb3f6d9c5ac7e159c04a96ff4dfe\n", run
    elif language == "typescript":
        assert run["stdout"] == "judge\n" and run["return_code"] == 0, run
        assert "Assertion failed" in run["stderr"]
    elif language == "java":
        assert run["stdout"] == "judge true\n" and run["return_code"] == 1, run
        assert "AssertionError: assertions are on" in run["stderr"]
    else:
        assert run["stdout"] == "judge\n", run
