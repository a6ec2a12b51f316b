"""API errors rendered as ``metav1.Status`` bodies, with upstream reasons, codes and messages."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the API server answers with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str | None, resource: str, group: str = "", **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = resource
    d.update(extra)
    return d


def qualified(resource: str, group: str) -> str:
    """``pods`` for the core group, ``leases.coordination.k8s.io`` otherwise (as upstream messages say)."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        details=_details(name, resource, group),
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        details=_details(name, resource, group),
    )


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_details(name, resource, group),
    )


OPTIMISTIC_LOCK = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(resource: str, name: str, group: str = "") -> ApiError:
    return conflict(resource, name, OPTIMISTIC_LOCK, group)


def invalid(kind: str, name: str, causes: list[dict[str, str]], group: str = "") -> ApiError:
    """422 Invalid. ``causes`` are ``{"reason", "message", "field"}`` dicts; the message joins them as upstream,
    after the qualified kind (``Deployment.apps "web" is invalid: ...``; kubectl shows ``The Deployment ...``
    from the details)."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    if len(parts) == 1:
        summary = parts[0]
    else:
        summary = "[" + ", ".join(parts) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified(kind, group)} "{name}" is invalid: {summary}',
        details=_details(name, kind, group, causes=causes),
    )


def field_invalid(field: str, value: Any, detail: str) -> dict[str, str]:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {shown}: {detail}", "field": field}


def field_required(field: str, detail: str = "") -> dict[str, str]:
    msg = "Required value" + (f": {detail}" if detail else "")
    return {"reason": "FieldValueRequired", "message": msg, "field": field}


def field_forbidden(field: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def field_not_supported(field: str, value: Any, supported: list[str]) -> dict[str, str]:
    opts = ", ".join(f'"{s}"' for s in supported)
    return {
        "reason": "FieldValueNotSupported",
        "message": f'Unsupported value: "{value}": supported values: {opts}',
        "field": field,
    }


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, *, name: str | None = None, resource: str = "", group: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, details=_details(name, resource, group))


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, details={})


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type})",
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    body["code"] = code
    return body
