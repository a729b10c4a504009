"""The one exception type a caller can act on."""


class SkillError(Exception):
    """A request the caller can fix: says what was wrong and what to send instead.

    Not a ValueError on purpose: pydantic would wrap a ValueError raised in a validator into a
    ValidationError and bury the message; this one passes through unchanged.

    The MCP server turns it into a tool error carrying this message; the CLI prints it and
    exits with status 2.

    >>> str(SkillError("num_generations=4 is below the floor of 8.", "Send num_generations >= 8."))
    'num_generations=4 is below the floor of 8. Send num_generations >= 8.'
    """

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} {fix}".strip())


def pydantic_error_message(error: Exception, what: str) -> str:
    """Render a pydantic ValidationError as one line per bad field, for a caller to fix.

    >>> from pydantic import BaseModel
    >>> class Example(BaseModel):
    ...     steps: int
    >>> try:
    ...     Example(steps="many")
    ... except Exception as exc:
    ...     print(pydantic_error_message(exc, "request"))
    Invalid request: steps: Input should be a valid integer, unable to parse string as an integer (got 'many').
    """
    errors = getattr(error, "errors", None)
    if errors is None:
        return f"Invalid {what}: {error}"
    parts = []
    for item in errors():
        location = ".".join(str(part) for part in item.get("loc", ())) or "(root)"
        given = item.get("input")
        shown = "" if isinstance(given, dict) else f" (got {given!r})"
        message = str(item.get("msg", "")).removeprefix("Value error, ").rstrip(".")
        parts.append(f"{location}: {message}{shown}")
    return f"Invalid {what}: " + "; ".join(parts) + "."
