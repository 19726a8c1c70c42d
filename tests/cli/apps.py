"""Apps for the CLI tests to name as ``tests.cli.apps:<attr>`` (the examples, on in-memory stores)."""

from examples import banking, shell

bank_ai, bank_agent = banking.build()
shell_ai, shell_agent = shell.build()


async def asgi(scope, receive, send):
    """A bare ASGI app: ``serve`` runs it as it is."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"plain ASGI"})
