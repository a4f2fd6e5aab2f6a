"""The service's OpenAPI document (``/openapi.json``), its schemas taken from the models the
endpoints read and write, so that it cannot drift from them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from a2e.caps.tools.models import ToolDefinition, ToolResult
from a2e_engine.engine.service.rest import CallBody
from a2e_engine.engine.service.sandbox_fusion import RunCodeRequest

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"


def _schemas(*models: type[BaseModel]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template=_REF)
        found.update(schema.pop("$defs", {}))
        found[model.__name__] = schema
    return found


def _json(ref: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model=ref)}}},
    }


def _error(description: str) -> dict[str, Any]:
    return _json("Error", description)


def openapi_document(version: str) -> dict[str, Any]:
    schemas = _schemas(ToolResult, ToolDefinition, CallBody, RunCodeRequest)
    schemas["Error"] = {
        "type": "object",
        "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
        "required": ["error", "message"],
    }
    secured: list[dict[str, list[str]]] = [{"bearer": []}, {"query_token": []}]
    refused = {"401": _error("no token, or a wrong one"), "429": _error("overloaded: retry")}
    call_responses = {
        "200": {
            **_json("ToolResult", "the result, whatever the tool did"),
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(model="ToolResult")}},
                "text/event-stream": {
                    "schema": {"type": "string"},
                    "description": "with Accept: text/event-stream: 'tool/event' events, "
                    "then one 'result' (or 'error')",
                },
            },
        },
        "400": _error("the body is not a call"),
        "403": _json("ToolResult", "the tool is denied by policy"),
        "404": _json("ToolResult", "no such tool"),
        "408": _error("the body did not arrive in time"),
        "413": _error("the body is over the limit"),
        **refused,
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "a2e-engine", "version": version},
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "query_token": {"type": "apiKey", "in": "query", "name": "token"},
            },
        },
        "security": secured,
        "paths": {
            "/v1/tools": {
                "get": {
                    "summary": "List the tools, or search them",
                    "parameters": [
                        {"name": "query", "in": "query", "schema": {"type": "string"}},
                        {"name": "tags", "in": "query", "schema": {"type": "string"}},
                        {"name": "kind", "in": "query", "schema": {"type": "string"}},
                        {"name": "include_deferred", "in": "query", "schema": {"type": "boolean"}},
                    ],
                    "responses": {
                        "200": {
                            "description": "the tools",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "properties": {
                                            "tools": {
                                                "type": "array",
                                                "items": {
                                                    "$ref": _REF.format(model="ToolDefinition")
                                                },
                                            }
                                        },
                                    }
                                }
                            },
                        },
                        **refused,
                    },
                }
            },
            "/v1/tools/{tool_name}": {
                "post": {
                    "summary": "Call a tool in a fresh sandboxed worker",
                    "parameters": [
                        {
                            "name": "tool_name",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": _REF.format(model="CallBody")}}
                        }
                    },
                    "responses": call_responses,
                }
            },
            "/run_code": {
                "post": {
                    "summary": "SandboxFusion's run_code",
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": _REF.format(model="RunCodeRequest")}
                            }
                        }
                    },
                    "responses": {
                        "200": {"description": "SandboxFusion's RunCodeResponse"},
                        "422": _error("the request cannot be read"),
                        **refused,
                    },
                }
            },
            "/v1/ping": {"get": {"summary": 'SandboxFusion\'s ping: "pong"', "responses": {}}},
            "/healthz": {
                "get": {
                    "summary": "alive",
                    "security": [],
                    "responses": {"200": {"description": "alive"}},
                }
            },
            "/readyz": {"get": {"summary": "ready for calls (503 if not)", "responses": {}}},
            "/metrics": {"get": {"summary": "Prometheus text", "responses": {}}},
        },
    }
