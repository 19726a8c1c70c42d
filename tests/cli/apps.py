"""Apps for the CLI tests to name as ``tests.cli.apps:<attr>`` (the examples, on in-memory stores)."""

from examples import banking, shell
from pausepoint import FunctionModel, ModelRequest, ModelResponse, Pausepoint
from pausepoint.errors import ModelUnavailable
from pausepoint.models.openai import OpenAI

bank_ai, bank_agent = banking.build()
shell_ai, shell_agent = shell.build()


async def asgi(scope, receive, send):
    """A bare ASGI app: ``serve`` runs it as it is."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"plain ASGI"})


def _down(request: ModelRequest) -> ModelResponse:
    raise ModelUnavailable("the model is down for maintenance")


#: OpenAI without a key (the CLI tests run without provider keys): the chat checks it before prompting
cloud_agent = Pausepoint(plugins=[OpenAI()]).define_agent(name="cloud", model="openai/gpt-4o-mini")
#: every model call fails, so no session is ever written
failing_agent = Pausepoint().define_agent(name="failing", model=FunctionModel("test/down", _down))
empty_ai = Pausepoint()
