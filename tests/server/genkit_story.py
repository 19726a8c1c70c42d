"""Run by the reference's own Python (genkit 0.12.0): its ``remote_agent`` drives the lab agent
through one scenario and records what a user of it sees after every step.

``python genkit_story.py <agent url> <token> <scenario> [<other url>]`` prints one JSON line per step:
``{"step", "client": chat.messages, "snapshot": getSnapshot's messages, "chunks": [...],
"output": AgentOutput, "interrupts": [[name, ref, input]...], "status": ...}``. The
``detach`` scenario also talks over stdin/stdout: it prints ``{"detached": snapshotId}``,
waits for a line, aborts, and prints what it saw; with ``<other url>`` (the same agent served by
another process) it polls and aborts through that one. Kept free of pausepoint imports.
"""

import asyncio
import json
import sys

from genkit import Part
from genkit.exp import remote_agent


def dump(value):
    if value is None:
        return None
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value.model_dump(by_alias=True, exclude_none=True, mode="json")


def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


async def step(chat, name, turn=None, response=None):
    chunks = []
    if turn is not None:
        chunks = [dump(chunk.raw) async for chunk in turn.stream]
        response = await turn.response
    snapshot = await chat.get_snapshot()
    say(
        step=name,
        client=dump(chat.messages),
        snapshot=dump(snapshot.state.messages) if snapshot is not None else None,
        snapshot_meta={k: v for k, v in dump(snapshot).items() if k != "state"} if snapshot is not None else None,
        chunks=chunks,
        output=dump(response.raw),
        interrupts=[[i.name, i.ref, i.input] for i in response.interrupts],
        finish=str(response.finish_reason),
    )
    return response


async def main(url, token, scenario, other_url=None):
    headers = {"Authorization": f"Bearer {token}"}
    agent = remote_agent(url, headers=headers, state_management="server")
    other = remote_agent(other_url or url, headers=headers, state_management="server")
    chat = agent.chat()
    streamed = scenario.endswith("-streamed")
    name = scenario.removesuffix("-streamed")

    async def send(text, label):
        if streamed:
            return await step(chat, label, turn=chat.send_stream(text))
        return await step(chat, label, response=await chat.send(text))

    async def resume(label, **answers):
        if streamed:
            return await step(chat, label, turn=chat.resume_stream(**answers))
        return await step(chat, label, response=await chat.resume(**answers))

    if name == "sibling":
        res = await send("Check balance of A and transfer $5 to B", "send")
        [approval] = res.interrupts
        await resume("resume", respond=[approval.respond({"approved": True})])
    elif name == "partial":
        res = await send("Transfer $1 to A and $2 to B", "send")
        first, second = res.interrupts
        await resume("first", respond=[first.respond({"approved": True})])
        await resume("second", respond=[second.respond({"approved": False, "feedback": "no"})])
    elif name == "restart":
        res = await send("Run: rm x", "send")
        [pause] = res.interrupts
        res = await resume("again", restart=[pause.restart()])
        [pause] = res.interrupts
        # the same input as a replacement (Genkit sends metadata.replacedInput) on a tool without edits
        await resume("approved", restart=[pause.restart(resumed_metadata={"tool_approved": True},
                                                         replace_input=pause.input)])  # fmt: skip
    elif name == "stream-ref":
        turn = chat.send_stream("Transfer $7 to C")
        chunks = [chunk async for chunk in turn.stream]
        await turn.response
        [request] = [p.tool_request for c in chunks for p in c.tool_requests]
        answer = Part.from_tool_response(name=request.name, ref=request.ref, output={"approved": True})
        await step(chat, "answered by the streamed ref", response=await chat.resume(respond=[answer]))
    elif name == "my-session":
        chat = agent.chat(session_id="my-conv-1")
        await step(chat, "created", response=await chat.send("hello"))
        again = agent.chat(session_id="my-conv-1")
        await step(again, "continued", response=await again.send("again"))
    elif name == "other-session":
        try:
            await agent.chat(session_id="my-conv-1").send("let me in")
            say(step="other", error=None)
        except Exception as exc:  # the reference's AgentError
            say(step="other", error=getattr(exc, "status", type(exc).__name__), message=str(exc))
    elif name == "detach":
        detached = await chat.detach("Slow: think it over")
        polled = await other.get_snapshot(snapshot_id=detached.snapshot_id)
        say(detached=detached.snapshot_id, session=chat.session_id, status=str(polled.status),
            client=dump(chat.messages), snapshot=dump(polled.state.messages))  # fmt: skip
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        before = await other.abort(detached.snapshot_id)  # another client, maybe through another server
        final = await detached.wait(interval=0.05)
        again = await other.abort(detached.snapshot_id)
        say(step="aborted", before=str(before), status=str(final.status), finish=str(final.finish_reason),
            again=str(again), snapshot=dump(final.state.messages))  # fmt: skip
        same = await chat.send("same chat")  # continues from the (aborted) detached snapshot it holds
        res = await agent.chat(session_id=chat.session_id).send("hello after")
        say(step="after", text=res.text, finish=str(res.finish_reason), same=same.text)
    else:
        raise SystemExit(f"no scenario {scenario!r}")


asyncio.run(main(*sys.argv[1:]))
