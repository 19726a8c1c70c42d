"""Does a local model decide by itself? The banking agent's prompts, tool choice not forced.

``.venv/bin/python -m benchmarks.local_quality [--model local/qwen2.5-coder-1.5b] [--trials 10]
[--temperatures 0,0.7] [--threads N]`` runs each prompt ``--trials`` times at each temperature
on the banking agent (``pausepoint.demo``, real SQLite-free in-memory sessions) and prints, per
prompt: how often the model asked for approval first, moved money without approval, made the
transfer right after the approval, and answered in plain text; and the seconds per model call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from typing import Any

from pausepoint import AgentFinishReason
from pausepoint.demo import build
from pausepoint.models._model import ChunkSink, Model, ModelRequest, ModelResponse
from pausepoint.models.local import Local

MONEY = ["Transfer $500 to savings.", "Send 20 dollars to Bob", "Move $1,000 from checking to savings please"]
PLAIN = ["Hello!", "What's my balance?"]
# the first run's flow (README, issue 17): a greeting first, then the transfer in the same session
AFTER_HELLO = "Hello! → Transfer $500 to savings."


class Timed:
    """The model, timing each call."""

    def __init__(self, model: Model) -> None:
        self.name = model.name
        self._model = model
        self.seconds: list[float] = []

    async def generate(self, request: ModelRequest, on_chunk: ChunkSink | None = None) -> ModelResponse:
        started = time.perf_counter()
        try:
            return await self._model.generate(request, on_chunk)
        finally:
            self.seconds.append(time.perf_counter() - started)


async def trial(model: Timed, prompt: str, temperature: float) -> Counter[str]:
    ledger: list[str] = []
    _, agent = build(ledger=ledger, model=model, config={"temperature": temperature})
    chat = agent.chat()
    seen: Counter[str] = Counter()
    if prompt == AFTER_HELLO:
        greeted = await chat.send("Hello!")
        if greeted.finish_reason != AgentFinishReason.STOP or ledger:
            seen["greeting not answered in text"] += 1
        prompt = prompt.split(" → ")[1]
    res = await chat.send(prompt)
    if res.finish_reason == AgentFinishReason.INTERRUPTED and res.interrupts[0].name == "userApproval":
        seen["approval first"] += 1
        res = await chat.resume(respond=[res.interrupts[0].respond({"approved": True})])
        if ledger and res.finish_reason == AgentFinishReason.STOP:
            seen["transfer after approval"] += 1
    elif ledger:
        seen["transfer WITHOUT approval"] += 1
    elif res.finish_reason == AgentFinishReason.STOP and res.text:
        seen["plain answer"] += 1
    else:
        seen[f"other: {res.finish_reason}"] += 1
    return seen


async def main(args: argparse.Namespace) -> None:
    plugin = Local(n_ctx=4096, n_threads=args.threads, progress=print)
    resolved = plugin.resolve_model(args.model)
    assert resolved is not None, args.model
    print(resolved.prepare())
    model = Timed(resolved)
    rows: list[tuple[str, float, Counter[str]]] = []
    for temperature in args.temperatures:
        for prompt in [*MONEY, AFTER_HELLO, *PLAIN]:
            total: Counter[str] = Counter()
            for _ in range(args.trials):
                total += await trial(model, prompt, temperature)
            rows.append((prompt, temperature, total))
            print(f"{temperature:>4} {prompt:<48} {dict(total)}", flush=True)
    print()
    print(f"{args.model}, {args.trials} trials per prompt, {args.threads or 'default'} thread(s)")
    print("| prompt | temperature | approval first | transfer without approval | transfer right after approval |"
          " plain answer |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for prompt, temperature, total in rows:
        money = prompt in (*MONEY, AFTER_HELLO)
        cells: list[Any] = [
            f"{total['approval first']}/{args.trials}" if money else "-",
            f"{total['transfer WITHOUT approval']}/{args.trials}",
            f"{total['transfer after approval']}/{args.trials}" if money else "-",
            f"{total['plain answer']}/{args.trials}" if not money else "-",
        ]
        print(f"| {prompt} | {temperature} | " + " | ".join(cells) + " |")
    seconds = sorted(model.seconds)
    print(
        f"\nper model call: {len(seconds)} calls, median {statistics.median(seconds):.1f} s, "
        f"p90 {seconds[int(len(seconds) * 0.9)]:.1f} s, max {seconds[-1]:.1f} s"
    )
    plugin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--temperatures", default="0,0.7", type=lambda s: [float(t) for t in s.split(",")])
    parser.add_argument("--threads", type=int, default=None)
    asyncio.run(main(parser.parse_args()))
