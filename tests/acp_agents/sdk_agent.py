"""An ACP agent built with the reference SDK (`agent-client-protocol`), for the proxy's tests.

It tells back what it received: each prompt is answered with one `agent_message_chunk` whose text is the JSON
list of the prompt's content blocks, and is appended as one JSON line to the file named by `ACP_TEST_RECORD`
(when set). A prompt whose last text block reads `usage USED SIZE` first reports a `usage_update`. Extension
methods answer with their own method name and params; extension notifications are recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

from acp import InitializeResponse, NewSessionResponse, PromptResponse, run_agent, update_agent_message_text
from acp.schema import UsageUpdate


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get("ACP_TEST_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


class EchoAgent:
    """The smallest useful agent: one session per `session/new`, every prompt echoed."""

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **_kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"sdk-{uuid.uuid4().hex[:12]}")

    async def prompt(self, prompt: list[Any], session_id: str, **_kwargs: Any) -> PromptResponse:
        blocks = [block.model_dump(by_alias=True, exclude_none=True) for block in prompt]
        _record({"session": session_id, "prompt": blocks})
        texts = [block["text"] for block in blocks if block.get("type") == "text"]
        words = texts[-1].split() if texts else []
        if len(words) == 3 and words[0] == "usage":
            await self.conn.session_update(session_id, UsageUpdate(session_update="usage_update",
                                                                   used=int(words[1]), size=int(words[2])))
        await self.conn.session_update(session_id, update_agent_message_text(json.dumps(blocks)))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **_kwargs: Any) -> None:
        _record({"cancel": session_id})

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"method": method, "params": params}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        _record({"notification": method, "params": params})


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))
