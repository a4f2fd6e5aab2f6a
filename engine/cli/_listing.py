"""``a2e list``: the tools, or a search among them (``--query``), as lines or JSON."""

from __future__ import annotations

import argparse
import json

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine.cli._arguments import Subcommands
from a2e_engine.engine.cli._engine_options import add_engine_options, engine_from_args, started

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add ``a2e list``."""
    lister = sub.add_parser("list", help="list (or search) the tools")
    lister.add_argument("--query", default="", help="search instead of listing")
    lister.add_argument("--all", action="store_true", help="include deferred tools in a search")
    lister.add_argument("--json", dest="json_output", action="store_true", help="print JSON")
    add_engine_options(lister)
    lister.set_defaults(func=run_list)


def run_list(args: argparse.Namespace) -> int:
    with started(engine_from_args(args)) as engine:
        tools = ToolAPI(engine.connect()).list(query=args.query, include_deferred=args.all)
    if args.json_output:
        print(json.dumps([t.model_dump(mode="json") for t in tools], indent=2))
    else:
        for tool in tools:
            params = ", ".join(p.name + ("" if p.required else "?") for p in tool.input_parameters)
            print(f"{tool.name}({params})  {tool.description}")
    return 0
