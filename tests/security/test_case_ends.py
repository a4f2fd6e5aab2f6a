"""A case ends when nothing of it is left: what a program starts is its case's, from its compile
or syntax check to its last case, counted against its limits and killed at its end, however it
moves (``sandbox._run_domain``: the worker's case group, frozen and emptied after every step).

Each attack here succeeded when a case ended with the program's own process: a leftover that
changed its pid in a loop outlived the sweep, a child holding the output worked unaccounted
after the program exited, memory in a memfd never mapped was no memory, and a syntax check ran
the program's code with nothing swept after it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.harness import Attacker, Sandbox, attack

GROUP = "the case group: frozen, then emptied, at the end of every step"
NO_GROUP = "no case group (no cgroups, no PID namespace): bounded by the call's end alone"


def judged(attacker: Attacker, language: str, program: str, cases: list[Any], **limits: Any) -> Any:
    result = attacker.attack(
        tool="code_eval",
        timeout=60,
        language=language,
        program=program,
        test_cases=cases,
        **limits,
    )
    assert result.success, result.error
    return result.data


def has_case_group(sandbox: Sandbox) -> bool:
    """Whether the sandbox runs with every layer a case group needs (root, cgroup v1, PID
    namespaces), and then has the group (a host whose v1 cgroups lack a freezer says why)."""
    if not (sandbox.has("pid_namespace") and sandbox.has("pids_cgroup")):
        return False
    assert sandbox.has("case_cgroup"), sandbox.layer("case_cgroup")
    return True


#: Case 1 leaves processes behind, in a session of their own, that start a child again as
#: soon as one is killed: a sweep that kills what one listing of ``/proc`` found leaves the
#: children started between the listing and the kills. Later cases look for them by the
#: argument they were started with (their command line: they may not rename themselves).
HOPPER = r"""
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>
static bool alive() {
    DIR* proc = opendir("/proc");
    for (dirent* entry; proc && (entry = readdir(proc));) {
        char path[64], line[256] = {0};
        snprintf(path, sizeof path, "/proc/%s/cmdline", entry->d_name);
        FILE* file = fopen(path, "r");
        if (!file) continue;
        size_t n = fread(line, 1, sizeof line - 1, file);
        fclose(file);
        for (size_t i = 0; i < n; i++) if (!line[i]) line[i] = ' ';
        if (strstr(line, "a2e-hopper")) return true;
    }
    return false;
}
int main(int argc, char** argv) {
    if (argc > 1) {  // sixteen guardians, each a child again as soon as it has lost one
        setsid();
        for (int i = 0; i < 4; i++) fork();
        for (;;) {
            pid_t child = fork();
            if (child == 0) for (;;) pause();
            if (child > 0) waitpid(child, nullptr, 0);
        }
    }
    char word[16] = {0};
    if (scanf("%15s", word) == 1 && !strcmp(word, "spawn") && fork() == 0) {
        execl("./main", "main", "a2e-hopper", (char*)0);
        _exit(1);
    }
    usleep(20000);
    puts(alive() ? "alive" : "none");
}
"""


@attack("4. a leftover that changes its pid outlives its case", full=GROUP, reduced=NO_GROUP)
def test_a_leftover_that_hops_pids_is_gone_before_the_next_case(
    sandbox: Sandbox, attacker: Attacker
) -> None:
    cases = [{"input": "spawn", "output": "alive"}] + [{"input": "look", "output": "none"}] * 3
    report = judged(attacker, "cpp", HOPPER, cases, time_limit=5)
    if has_case_group(sandbox):
        assert report["verdict"] == "AC", report["tests"]
    else:
        assert report["verdict"] in ("AC", "WA")  # the call's end kills it (the harness checks)


#: The program answers and exits at once; a child it leaves holding its output works on.
WORKS_AFTER_EXIT = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <ctime>
int main(int argc, char** argv) {
    int n; if (scanf("%d", &n) != 1) return 1;
    printf("%d\n", n + 1); fflush(stdout);
    if (n > 0 && fork() == 0) {
        if (n == 1) {  // CPU: 0.4 s of it
            clock_t start = clock(); volatile unsigned long x = 0;
            while (clock() - start < 0.4 * CLOCKS_PER_SEC) x++;
        } else {  // memory: 160 MiB, touched
            size_t size = 160u << 20;
            volatile char* p = (volatile char*)malloc(size);  // volatile: never left out
            for (size_t i = 0; p && i < size; i += 4096) p[i] = 1;
            usleep(150000);
        }
        _exit(0);
    }
    return 0;
}
"""


@attack(
    "5. a child holding the output works past its program's end, unaccounted",
    full=GROUP,
    reduced="its process tree, read while the program runs",
)
def test_what_runs_after_the_program_exits_counts(sandbox: Sandbox, attacker: Attacker) -> None:
    """The child's CPU time must pass the limit while its output is drained (``DRAIN_S``,
    0.2 s of wall-clock time after the program's exit): a limit of a quarter of that holds on
    a loaded machine, where the child gets a fraction of a core."""
    honest = judged(
        attacker,
        "cpp",
        WORKS_AFTER_EXIT,
        [{"input": "0", "output": "1"}],
        cpu_time_limit=0.05,
        memory_mb=64,
    )
    assert honest["verdict"] == "AC", honest
    cpu = judged(
        attacker, "cpp", WORKS_AFTER_EXIT, [{"input": "1", "output": "2"}], cpu_time_limit=0.05
    )
    memory = judged(
        attacker, "cpp", WORKS_AFTER_EXIT, [{"input": "2", "output": "3"}], memory_mb=64
    )
    if has_case_group(sandbox):
        assert cpu["verdict"] == "TLE", cpu["tests"]
        assert cpu["tests"][0]["exceeded"] == "cpu_time"
        assert memory["verdict"] == "MLE", memory["tests"]


#: Memory held in memfds and never mapped: no process's resident set shows it.
MEMFD = r"""
import os
n = int(input())
fds = [os.memfd_create('a2e-held') for _ in range(2)]
block = b'x' * (1 << 20)
for fd in fds:
    for i in range(n // 2):
        os.pwrite(fd, block, i << 20)
print(n)
"""


@attack(
    "6. memory held in memfds never mapped",
    full="the case group's memory counts shmem pages; the kernel limits it",
    reduced="the call's address space and the worker's limits alone",
)
def test_memory_in_memfds_counts(sandbox: Sandbox, attacker: Attacker) -> None:
    honest = judged(attacker, "python", MEMFD, [{"input": "8", "output": "8"}], memory_mb=64)
    assert honest["verdict"] == "AC", honest
    held = judged(attacker, "python", MEMFD, [{"input": "300", "output": "300"}], memory_mb=64)
    if has_case_group(sandbox):
        assert held["verdict"] == "MLE", held["tests"]


#: Perl's syntax check (``perl -c``) runs BEGIN blocks: one leaves a process behind there
#: (``$^C`` is true only under ``-c``), started with an argument each case looks for.
PERL_CHECK_DAEMON = r"""
BEGIN {
    if ($^C && fork() == 0) {
        require POSIX; POSIX::setsid();
        exec('perl', '-e', 'sleep 30', 'a2e-from-check');
    }
}
my $alive = 'none';
opendir(my $proc, '/proc');
for my $pid (grep { /^\d+$/ } readdir($proc)) {
    open(my $cmdline, '<', "/proc/$pid/cmdline") or next;
    my $line = <$cmdline>; close($cmdline);
    $alive = 'alive' if defined $line && $line =~ /a2e-from-check/;
}
print "$alive\n";
"""


@attack(
    "3. a syntax check that runs the program's code leaves a process behind",
    full="the check is sealed like a run and its case group emptied after it",
    reduced=NO_GROUP,
)
def test_nothing_a_syntax_check_starts_outlives_it(sandbox: Sandbox, attacker: Attacker) -> None:
    report = judged(
        attacker,
        "perl",
        PERL_CHECK_DAEMON,
        [{"input": "", "output": "none"}, {"input": "", "output": "none"}],
        time_limit=5,
    )
    if has_case_group(sandbox):
        assert report["verdict"] == "AC", report["tests"]


@pytest.mark.parametrize("language", ["python", "cpp"])
def test_a_case_that_starts_nothing_ends_at_once(attacker: Attacker, language: str) -> None:
    """No sweep waits for what is not there."""
    program = (
        "print(int(input()) + 1)\n"
        if language == "python"
        else "#include <iostream>\nint main(){int n; std::cin >> n; std::cout << n + 1;}\n"
    )
    report = judged(
        attacker, language, program, [{"input": str(n), "output": str(n + 1)} for n in range(5)]
    )
    assert report["verdict"] == "AC"
    assert report["duration_ms"] < 5000, report["duration_ms"]


#: A grandchild, orphaned at once, holds ``NMB`` MiB (huge pages) for a moment, and tells the
#: program on a pipe: over before the first reading of the case's memory.
MEMORY_BURST = r"""
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int main() {
    long n = (long)NMB << 20; int fd[2]; if (pipe(fd)) return 1;
    pid_t child = fork();
    if (child == 0) {
        if (fork() == 0) {
            char* raw = (char*)mmap(0, n + (2 << 20), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            char* p = (char*)(((uintptr_t)raw + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
            madvise(p, n, MADV_HUGEPAGE);
            long s = 0;
            for (long i = 0; i < n; i += 4096) p[i] = 1;
            for (long i = 0; i < n; i += 4096) s += p[i];
            char r = s == n / 4096 ? 'y' : 'n'; if (write(fd[1], &r, 1) != 1) _exit(1);
            _exit(0);
        }
        _exit(0);
    }
    close(fd[1]); waitpid(child, 0, 0); char r = 0; if (read(fd[0], &r, 1) != 1) r = 0;
    puts(r == 'y' ? "ok" : "no");
}
"""
#: 20 MiB shared between processes: mapped shared, or inherited by two children that read it.
SHARED_PAGES = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int main() {
    long n = 20L << 20; int mode; if (scanf("%d", &mode) != 1) return 1;
    char* p = mode == 0 ? (char*)mmap(0, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                      -1, 0)
                        : (char*)malloc(n);
    memset(p, 1, n);
    for (int k = 0; k < (mode == 0 ? 0 : 2); k++)
        if (fork() == 0) { long s = 0; for (long i = 0; i < n; i += 4096) s += p[i];
                           usleep(100000); _exit(s != n / 4096); }
    usleep(100000);
    int status, bad = 0; while (wait(&status) > 0) bad |= status;
    puts(bad ? "no" : "ok");
}
"""


@attack(
    "5b. a burst of memory in an orphan, over before it is read",
    full="the kernel limits the case group just past its limit",
    reduced=NO_GROUP,
)
def test_a_burst_between_two_readings_is_still_out_of_memory(
    sandbox: Sandbox, attacker: Attacker
) -> None:
    cases = [{"input": "", "output": "ok"}] * 5
    honest = judged(attacker, "c", MEMORY_BURST.replace("NMB", "16"), cases, memory_mb=32)
    assert honest["verdict"] == "AC", honest["tests"]
    burst = judged(attacker, "c", MEMORY_BURST.replace("NMB", "44"), cases, memory_mb=32)
    if has_case_group(sandbox):
        assert burst["summary"] == {"MLE": 5}, burst["tests"]


def test_pages_shared_between_processes_count_once(sandbox: Sandbox, attacker: Attacker) -> None:
    """An honest program is not over its limit for what its processes share."""
    shared = [{"input": "0", "output": "ok"}]
    assert judged(attacker, "c", SHARED_PAGES, shared, memory_mb=32)["verdict"] == "AC"
    forked = [{"input": "1", "output": "ok"}]
    report = judged(attacker, "c", SHARED_PAGES, forked, memory_mb=48)
    if has_case_group(sandbox):
        assert report["verdict"] == "AC", report["tests"]


#: Kills every other child of its parent (the worker): the clean template its case was forked
#: from, which forks the next. It says what it saw, whatever the kill did.
KILL_THE_TEMPLATE = r"""
import os, signal
n = int(input())
me, parent = os.getpid(), os.getppid()
seen = 0
for task in os.listdir(f"/proc/{parent}/task"):
    with open(f"/proc/{parent}/task/{task}/children") as fh:
        for pid in map(int, fh.read().split()):
            if pid != me:
                seen += 1
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
print(n if seen else "alone")
"""


@attack(
    "7. a Python case kills the clean template that forks the next case",
    full="its Landlock layer scopes its signals: the template is beyond them",
    reduced="the same: the run's own layer needs only the host's Landlock",
)
def test_a_case_cannot_kill_the_template_that_forks_the_next(
    sandbox: Sandbox, attacker: Attacker
) -> None:
    """Every case sees the template beside it (the first would print "alone" otherwise), and
    the next cases still run: a template killed would leave them unstarted (RE)."""
    cases = [{"input": str(n), "output": str(n)} for n in range(3)]
    report = judged(attacker, "python", KILL_THE_TEMPLATE, cases)
    assert report["verdict"] == "AC", report["tests"]
