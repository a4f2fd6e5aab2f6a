"""A catalog of more than a thousand real tool descriptions, and queries with known answers.

Source: the public functions of the Python standard library, as the running interpreter
documents them (name, first paragraph of the docstring, parameter names). They are real API
descriptions anyone can regenerate, written by other people than the queries' author, so the
search is not tuned to its own test data. Each tool is named ``module.function`` (``os.listdir``)
and tagged with its module. The queries are natural-language requests, one per target tool,
written without copying the docstring's wording where it could be avoided.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

from a2e.caps.tools._models import ToolDefinition, ToolParameter

__all__ = ["QUERIES", "stdlib_catalog"]

MODULES = [
    "os",
    "os.path",
    "shutil",
    "math",
    "cmath",
    "statistics",
    "random",
    "string",
    "re",
    "json",
    "csv",
    "datetime",
    "time",
    "calendar",
    "hashlib",
    "hmac",
    "base64",
    "binascii",
    "zlib",
    "gzip",
    "bz2",
    "lzma",
    "zipfile",
    "tarfile",
    "urllib.parse",
    "html",
    "xml.etree.ElementTree",
    "textwrap",
    "difflib",
    "unicodedata",
    "itertools",
    "functools",
    "operator",
    "heapq",
    "bisect",
    "copy",
    "pprint",
    "glob",
    "fnmatch",
    "tempfile",
    "socket",
    "ssl",
    "email.utils",
    "mimetypes",
    "uuid",
    "secrets",
    "struct",
    "codecs",
    "locale",
    "shlex",
    "subprocess",
    "signal",
    "threading",
    "sqlite3",
    "urllib.request",
    "ipaddress",
    "platform",
    "sysconfig",
    "inspect",
    "ast",
    "dis",
    "tokenize",
    "keyword",
    "typing",
    "dataclasses",
    "contextlib",
    "gc",
    "traceback",
    "warnings",
    "logging",
    "getpass",
    "pwd",
    "grp",
    "resource",
    "select",
    "asyncio",
    "io",
    "pickle",
    "shelve",
    "configparser",
    "tomllib",
    "plistlib",
    "colorsys",
    "quopri",
    "filecmp",
    "fileinput",
    "stat",
    "linecache",
    "py_compile",
    "compileall",
    "importlib",
    "pkgutil",
    "runpy",
    "timeit",
    "sched",
    "graphlib",
    "ftplib",
    "smtplib",
    "webbrowser",
    "wsgiref.util",
    "email.header",
]

#: (request, the tool that answers it)
QUERIES: list[tuple[str, str]] = [
    ("list the entries of a directory", "os.listdir"),
    ("copy a whole directory tree to another place", "shutil.copytree"),
    ("delete a directory and everything inside it", "shutil.rmtree"),
    ("how much disk space is free", "shutil.disk_usage"),
    ("locate an executable program on the PATH", "shutil.which"),
    ("square root of a number", "math.sqrt"),
    ("greatest common divisor of integers", "math.gcd"),
    ("median of a list of numbers", "statistics.median"),
    ("standard deviation of a sample", "statistics.stdev"),
    ("shuffle a list randomly in place", "random.shuffle"),
    ("substitute occurrences of a regular expression pattern", "re.sub"),
    ("split a string by a regular expression", "re.split"),
    ("serialize an object to a JSON formatted string", "json.dumps"),
    ("deserialize a JSON document from a string", "json.loads"),
    ("compress data with the DEFLATE algorithm", "zlib.compress"),
    ("compute a CRC-32 checksum", "zlib.crc32"),
    ("encode bytes as base64", "base64.b64encode"),
    ("decode a base64 encoded string", "base64.b64decode"),
    ("hexadecimal representation of binary data", "binascii.hexlify"),
    ("check whether a file is a valid zip archive", "zipfile.is_zipfile"),
    ("escape special characters for HTML", "html.escape"),
    ("percent-encode a string for use in a URL", "urllib.parse.quote"),
    ("split a URL into its components", "urllib.parse.urlsplit"),
    ("build a query string from a dictionary", "urllib.parse.urlencode"),
    ("wrap a paragraph of text to a maximum line width", "textwrap.wrap"),
    ("remove common leading whitespace from lines", "textwrap.dedent"),
    ("find the closest matching words from a list", "difflib.get_close_matches"),
    ("unified diff between two sequences of lines", "difflib.unified_diff"),
    ("the n largest elements of a dataset", "heapq.nlargest"),
    ("insert into a sorted list keeping it sorted", "bisect.insort"),
    ("deep copy of an object", "copy.deepcopy"),
    ("find pathnames matching a wildcard pattern", "glob.glob"),
    ("create a temporary directory securely", "tempfile.mkdtemp"),
    ("resolve a host name to an IPv4 address", "socket.gethostbyname"),
    ("guess the MIME type of a file from its name", "mimetypes.guess_type"),
    ("generate a random UUID", "uuid.uuid4"),
    ("cryptographically strong random token in hexadecimal", "secrets.token_hex"),
    ("split a command line like a shell would", "shlex.split"),
    ("run a command and capture its output", "subprocess.check_output"),
    ("constant time comparison of two digests", "hmac.compare_digest"),
    ("sleep for a number of seconds", "time.sleep"),
    ("is a given year a leap year", "calendar.isleap"),
    ("pack values into a bytes object according to a format", "struct.pack"),
    ("parse a network address or network in CIDR notation", "ipaddress.ip_network"),
    ("parse Python source code into an abstract syntax tree", "ast.parse"),
    ("safely evaluate a string containing a Python literal", "ast.literal_eval"),
    ("format the current exception and its traceback", "traceback.format_exc"),
    ("read a password from the terminal without echoing it", "getpass.getpass"),
    ("look up a user account by user name", "pwd.getpwnam"),
    ("the current working directory", "os.getcwd"),
    ("compare two files for equality", "filecmp.cmp"),
    ("compile a Python source file to byte code", "py_compile.compile"),
    ("measure the execution time of a small snippet", "timeit.timeit"),
    ("open a URL in the web browser", "webbrowser.open"),
    ("the value of an environment variable", "os.getenv"),
    ("parse an email address into name and address", "email.utils.parseaddr"),
    ("sort a dependency graph topologically", "graphlib.TopologicalSorter"),
    ("pretty print a data structure", "pprint.pprint"),
    ("disassemble Python byte code", "dis.dis"),
    ("check whether a string is a Python keyword", "keyword.iskeyword"),
]


def _first_paragraph(doc: str) -> str:
    text = inspect.cleandoc(doc).split("\n\n")[0]
    return " ".join(text.split())[:400]


def stdlib_catalog() -> list[ToolDefinition]:
    """One tool per documented public function (and class) of the modules above."""
    tools: dict[str, ToolDefinition] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module_name in MODULES:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            for name, obj in inspect.getmembers(module):
                if name.startswith("_") or not (inspect.isroutine(obj) or inspect.isclass(obj)):
                    continue
                if getattr(obj, "__module__", module_name) not in (module_name, None) and (
                    inspect.isclass(obj)
                ):
                    continue  # classes re-exported from elsewhere
                doc = inspect.getdoc(obj) or ""
                tool_name = f"{module_name}.{name}"
                if not doc.strip() or tool_name in tools:
                    continue
                tools[tool_name] = ToolDefinition(
                    name=tool_name,
                    description=_first_paragraph(doc),
                    input_parameters=_parameters(obj),
                    tags=[module_name.split(".")[0]],
                    toolkit=module_name,
                )
    return list(tools.values())


def _parameters(obj: object) -> list[ToolParameter]:
    try:
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    return [
        ToolParameter(name=name, type="string", description="")
        for name in signature.parameters
        if name not in ("self", "cls") and name.isidentifier()
    ][:20]
