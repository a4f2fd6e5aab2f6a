"""The RL reward batch that ``a2e bench --reward-batch`` grades: six stdin/stdout problems, three
in Python and three in C++ (``#include <bits/stdc++.h>``), eight cases each, and eight samples
per problem, as a policy writes them: five right (each a different program, so that no grader
can answer one from another's run) and three that fail. The eighteen that fail cover what a
batch of rollouts holds: wrong answers (some right on most cases), whitespace that differs (a
trailing space, a CRLF), a crash on one case, a compile or syntax error, a slow program (half a
second a case), a case past the time limit, and exactly one program that loops forever: verl's
time limit is 10 s a case, and each looping case costs that much.

Ground truth is in verl's form (``{"inputs": [...], "outputs": [...]}`` as JSON text), the
expected outputs made by a reference function; completions are fenced as models fence them.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PROBLEMS", "QUICK_PROBLEMS", "Problem", "Sample", "samples"]

RIGHT = "right"


@dataclass(frozen=True)
class Sample:
    """One rollout: a problem's program, how it is meant to do (``kind``: ``right``, or how it
    fails), and the problem's ground truth."""

    key: str
    problem: str
    language: str  # "python" or "cpp", as SandboxFusion names them
    kind: str
    code: str
    ground_truth: str

    def completion(self, tag: str) -> str:
        """The completion, its program ending in a comment that names ``tag``: each system's
        run of the batch grades sources it has not seen, as each RL step's are new, so that
        no compile cache carries over from one run to the next."""
        comment = "//" if self.language == "cpp" else "#"
        return f"Here is my solution.\n\n```{self.language}\n{self.code}{comment} {tag}\n```\n"


@dataclass(frozen=True)
class Problem:
    key: str
    language: str
    inputs: tuple[str, ...]
    solve: Callable[[str], str]  # the reference: the expected stdout of an input
    right: tuple[str, ...]
    failing: tuple[tuple[str, str], ...]  # (kind, code)

    def ground_truth(self) -> str:
        outputs = [self.solve(given) for given in self.inputs]
        return json.dumps({"inputs": list(self.inputs), "outputs": outputs})

    def samples(self) -> list[Sample]:
        truth = self.ground_truth()
        graded = [(RIGHT, code) for code in self.right] + list(self.failing)
        return [
            Sample(f"{self.key}/{i + 1}-{_slug(kind)}", self.key, self.language, kind, code, truth)
            for i, (kind, code) in enumerate(graded)
        ]


def _slug(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")


def _code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _cpp(body: str) -> str:
    return "#include <bits/stdc++.h>\nusing namespace std;\n\n" + _code(body)


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split()]


def _after_first_line(text: str) -> str:
    return text.split("\n", 1)[1]


def _counted(lines: tuple[str, ...]) -> tuple[str, ...]:
    """Each line of numbers as an input: how many, then the numbers."""
    return tuple(f"{len(line.split())}\n{line}\n" for line in lines)


def _vowels(text: str) -> str:
    return f"{sum(1 for ch in text.rstrip(chr(10)) if ch in 'aeiou')}\n"


PY_SUM = Problem(
    "py_sum",
    "python",
    ("1 2\n", "3 4\n", "-5 5\n", "100 -1\n", "7 8\n", "0 0\n", "123456 654321\n", "-20 -22\n"),
    lambda given: f"{sum(_ints(given))}\n",
    (
        _code(r"""
            a, b = map(int, input().split())
            print(a + b)
        """),
        _code(r"""
            x, y = map(int, input().split())
            print(x + y)
        """),
        _code(r"""
            import sys

            numbers = sys.stdin.read().split()
            print(int(numbers[0]) + int(numbers[1]))
        """),
        _code(r"""
            print(sum(map(int, input().split())))
        """),
        _code(r"""
            def main():
                first, second = (int(t) for t in input().split())
                print(first + second)


            main()
        """),
    ),
    (
        (
            "wrong answer",
            _code(r"""
                a, b = map(int, input().split())
                print(a - b)
            """),
        ),
        (
            "trailing space",
            _code(r"""
                a, b = map(int, input().split())
                print(a + b, end=" \n")
            """),
        ),
        (
            "crash on one case",
            _code(r"""
                import sys

                a, b = map(int, input().split())
                if a == 7:
                    sys.exit(3)
                print(a + b)
            """),
        ),
    ),
)

PY_MAX = Problem(
    "py_max",
    "python",
    _counted(
        ("3 1 2", "1 2 3", "-4 -2 -9", "10 10", "0 -1 7 3", "-1 -1", "2 9 4 9 1", "100 200 300 400")
    ),
    lambda given: f"{max(_ints(_after_first_line(given)))}\n",
    (
        _code(r"""
            input()
            values = list(map(int, input().split()))
            print(max(values))
        """),
        _code(r"""
            n = int(input())
            nums = [int(t) for t in input().split()]
            print(max(nums[:n]))
        """),
        _code(r"""
            import sys

            data = sys.stdin.read().split()
            print(sorted(map(int, data[1:]))[-1])
        """),
        _code(r"""
            input()
            best = None
            for token in input().split():
                v = int(token)
                if best is None or v > best:
                    best = v
            print(best)
        """),
        _code(r"""
            from functools import reduce

            input()
            print(reduce(lambda p, q: p if p > q else q, map(int, input().split())))
        """),
    ),
    (
        (
            "syntax error",
            _code(r"""
                input()
                values = list(map(int, input().split()))
                print(max(values)
            """),
        ),
        (
            "wrong answer on some cases",
            _code(r"""
                n = int(input())
                values = list(map(int, input().split()))
                print(max(values[: n - 1]))
            """),
        ),
        (
            "slow, wrong on some cases",
            _code(r"""
                import time

                input()
                best = 0
                for v in map(int, input().split()):
                    best = max(best, v)
                time.sleep(0.5)
                print(best)
            """),
        ),
    ),
)

PY_VOWELS = Problem(
    "py_vowels",
    "python",
    tuple(
        f"{line}\n"
        for line in (
            "hello world",
            "rhythm",
            "aeiou",
            "programming is fun",
            "sky is grey",
            "a",
            "the quick brown fox jumps over the lazy dog",
            "bcd",
        )
    ),
    _vowels,
    (
        _code(r"""
            s = input()
            print(sum(1 for ch in s if ch in "aeiou"))
        """),
        _code(r"""
            line = input()
            count = 0
            for c in line:
                if c in "aeiou":
                    count += 1
            print(count)
        """),
        _code(r"""
            import re

            print(len(re.findall("[aeiou]", input())))
        """),
        _code(r"""
            text = input()
            print(sum(text.count(v) for v in "aeiou"))
        """),
        _code(r"""
            import sys

            word = sys.stdin.readline().rstrip("\n")
            print(len([x for x in word if x in set("aeiou")]))
        """),
    ),
    (
        (
            "infinite loop",
            _code(r"""
                s = input()
                count = 0
                i = 0
                while i < len(s):
                    if s[i] in "aeiou":
                        count += 1
                        i += 1
                print(count)
            """),
        ),
        (
            "slow, one case past the time limit",
            _code(r"""
                import time

                s = input()
                time.sleep(12 if len(s) > 30 else 0.5)
                print(sum(1 for ch in s if ch in "aeiou"))
            """),
        ),
        (
            "wrong answer on some cases",
            _code(r"""
                s = input()
                print(sum(1 for ch in s if ch in "aeiouy"))
            """),
        ),
    ),
)

CPP_PRODUCT = Problem(
    "cpp_product",
    "cpp",
    (
        "2 3\n",
        "7 6\n",
        "-4 5\n",
        "0 99\n",
        "1000000 1000000\n",
        "123456789 10\n",
        "-3 -3\n",
        "99999 99999\n",
    ),
    lambda given: f"{_ints(given)[0] * _ints(given)[1]}\n",
    (
        _cpp(r"""
            int main() {
                long long a, b;
                cin >> a >> b;
                cout << a * b << endl;
            }
        """),
        _cpp(r"""
            int main() {
                long long x, y;
                cin >> x >> y;
                cout << x * y << "\n";
                return 0;
            }
        """),
        _cpp(r"""
            int main() {
                long long p, q;
                scanf("%lld %lld", &p, &q);
                printf("%lld\n", p * q);
            }
        """),
        _cpp(r"""
            int main() {
                ios::sync_with_stdio(false);
                cin.tie(nullptr);
                long long first, second;
                cin >> first >> second;
                long long product = first * second;
                cout << product << '\n';
            }
        """),
        _cpp(r"""
            long long multiply(long long u, long long v) { return u * v; }

            int main() {
                long long u, v;
                cin >> u >> v;
                cout << multiply(u, v) << endl;
            }
        """),
    ),
    (
        (
            "compile error",
            _cpp(r"""
                int main() {
                    long long a, b;
                    cin >> a >> b
                    cout << a * b << endl;
                }
            """),
        ),
        (
            "trailing space",
            _cpp(r"""
                int main() {
                    long long a, b;
                    cin >> a >> b;
                    cout << a * b << " " << endl;
                }
            """),
        ),
        (
            "crash on one case",
            _cpp(r"""
                int main() {
                    long long a, b;
                    cin >> a >> b;
                    if (a == 7) return 3;
                    cout << a * b << endl;
                }
            """),
        ),
    ),
)

CPP_SUM = Problem(
    "cpp_sum",
    "cpp",
    _counted(
        (
            "1 2 3",
            "10 20 30 40 50",
            "42",
            "-1 -2 -3 -4",
            "2000000000 2000000000",
            "5 5 5 5 5 5",
            "0 0 0",
            "1 2 3 4 5 6 7",
        )
    ),
    lambda given: f"{sum(_ints(_after_first_line(given)))}\n",
    (
        _cpp(r"""
            int main() {
                int n;
                cin >> n;
                long long total = 0;
                for (int i = 0; i < n; ++i) {
                    long long v;
                    cin >> v;
                    total += v;
                }
                cout << total << endl;
            }
        """),
        _cpp(r"""
            int main() {
                int n;
                cin >> n;
                vector<long long> values(n);
                for (auto& v : values) cin >> v;
                cout << accumulate(values.begin(), values.end(), 0LL) << "\n";
            }
        """),
        _cpp(r"""
            int main() {
                int k;
                scanf("%d", &k);
                long long s = 0, x;
                for (int i = 0; i < k; i++) {
                    scanf("%lld", &x);
                    s += x;
                }
                printf("%lld\n", s);
            }
        """),
        _cpp(r"""
            int main() {
                int n;
                cin >> n;
                long long sum = 0;
                while (n--) {
                    long long x;
                    cin >> x;
                    sum += x;
                }
                cout << sum << '\n';
                return 0;
            }
        """),
        _cpp(r"""
            int main() {
                size_t count;
                cin >> count;
                vector<int64_t> numbers(count);
                for (size_t i = 0; i < count; ++i) cin >> numbers[i];
                int64_t result = 0;
                for (int64_t value : numbers) result += value;
                cout << result << endl;
            }
        """),
    ),
    (
        (
            "wrong answer on one case",
            _cpp(r"""
                int main() {
                    int n;
                    cin >> n;
                    int total = 0;
                    for (int i = 0; i < n; ++i) {
                        int v;
                        cin >> v;
                        total += v;
                    }
                    cout << total << endl;
                }
            """),
        ),
        (
            "slow, one case past the time limit",
            _cpp(r"""
                int main() {
                    int n;
                    cin >> n;
                    long long total = 0;
                    for (int i = 0; i < n; ++i) {
                        long long v;
                        cin >> v;
                        total += v;
                    }
                    this_thread::sleep_for(chrono::milliseconds(n > 6 ? 12000 : 500));
                    cout << total << endl;
                }
            """),
        ),
        (
            "crash on one case",
            _cpp(r"""
                int main() {
                    int n;
                    cin >> n;
                    vector<long long> values(n);
                    for (auto& v : values) cin >> v;
                    if (n == 5) cerr << values.at(n) << endl;
                    cout << accumulate(values.begin(), values.end(), 0LL) << endl;
                }
            """),
        ),
    ),
)

CPP_REVERSE = Problem(
    "cpp_reverse",
    "cpp",
    tuple(
        f"{line}\n"
        for line in ("hello", "abc", "racecar", "a", "hello world", "12345", "ab cd ef", "xyz")
    ),
    lambda given: given.rstrip("\n")[::-1] + "\n",
    (
        _cpp(r"""
            int main() {
                string s;
                getline(cin, s);
                reverse(s.begin(), s.end());
                cout << s << endl;
            }
        """),
        _cpp(r"""
            int main() {
                string line;
                getline(cin, line);
                string rev(line.rbegin(), line.rend());
                cout << rev << "\n";
            }
        """),
        _cpp(r"""
            int main() {
                string t, out;
                getline(cin, t);
                for (int i = (int)t.size() - 1; i >= 0; --i) out += t[i];
                cout << out << endl;
            }
        """),
        _cpp(r"""
            int main() {
                string w;
                getline(cin, w);
                size_t i = 0, j = w.size();
                while (i + 1 < j) {
                    swap(w[i], w[j - 1]);
                    ++i;
                    --j;
                }
                cout << w << '\n';
            }
        """),
        _cpp(r"""
            int main() {
                string text;
                getline(cin, text);
                stack<char> chars;
                for (char c : text) chars.push(c);
                while (!chars.empty()) {
                    cout << chars.top();
                    chars.pop();
                }
                cout << endl;
            }
        """),
    ),
    (
        (
            "compile error",
            _cpp(r"""
                int main() {
                    string s;
                    getline(cin, s);
                    reverse(s.begin(), s.end());
                    cout << reversed << endl;
                }
            """),
        ),
        (
            "wrong answer",
            _cpp(r"""
                int main() {
                    string s, r;
                    getline(cin, s);
                    for (int i = (int)s.size() - 1; i > 0; --i) r += s[i];
                    cout << r << endl;
                }
            """),
        ),
        (
            "CRLF line end",
            _cpp(r"""
                int main() {
                    string s;
                    getline(cin, s);
                    reverse(s.begin(), s.end());
                    cout << s << "\r\n";
                }
            """),
        ),
    ),
)

PROBLEMS: tuple[Problem, ...] = (PY_SUM, PY_MAX, CPP_PRODUCT, PY_VOWELS, CPP_SUM, CPP_REVERSE)
#: ``--quick``'s: one problem in each language with neither the loop nor a case past the time
#: limit, so that a smoke run takes seconds.
QUICK_PROBLEMS = ("py_sum", "cpp_product")


def samples(problems: tuple[str, ...] | None = None) -> list[Sample]:
    """The batch, problem by problem; only ``problems`` when named."""
    return [
        sample
        for problem in PROBLEMS
        if problems is None or problem.key in problems
        for sample in problem.samples()
    ]
