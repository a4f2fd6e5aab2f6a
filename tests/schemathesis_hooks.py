"""Schemathesis hooks for ``tests/test_openapi_contract.py``'s run against real tools: bodies that
reach the tools' code rather than stop at their arguments.

A call's ``arguments`` are whatever the tool's ``input_parameters`` say, which the document
cannot state for every tool: a generated object is given ``python_eval``'s one argument, ``code``
(one of its strings: random source, run in the sandbox); ``/run_code``'s ``language`` becomes
``python``, so that the run happens. Anything that is not an object is left to be refused.
"""

from __future__ import annotations

from typing import Any

import schemathesis

CALL = "/v1/tools/{tool_name}"
RUN_CODE = "/run_code"


@schemathesis.hook
def map_body(context: schemathesis.HookContext, body: Any) -> Any:
    operation = context.operation
    if operation is None or not isinstance(body, dict):
        return body
    if operation.path == RUN_CODE and isinstance(body.get("language"), str):
        return {**body, "language": "python"}
    arguments = body.get("arguments", {})
    if operation.path != CALL or not isinstance(arguments, dict):
        return body
    code = next((value for value in arguments.values() if isinstance(value, str)), "print(1)")
    return {**body, "arguments": {"code": code}}
