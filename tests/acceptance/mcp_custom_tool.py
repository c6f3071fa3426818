"""The official MCP Python SDK (mcp==2.3.0) calls `custom_tool` on `toolsmith serve` over stdio.

Usage: mcp_custom_tool.py TOOLSMITH PROJECT EXPECT

Starts `TOOLSMITH serve` in the directory PROJECT (with this process's HOME, TOOLSMITH_HOME,
TMPDIR and PATH), lists the tools, and asks `custom_tool` for the bash tool `tell_answer`.
EXPECT says how it must end (issue 25: a `custom_tool` call ends in a callable tool or in a
clear refusal, never in "registered" for a tool nobody can call):
- `refused`: the answer is an error naming the reason and a `hint:` line, printed as
  `refusal: <text>` lines for the test to compare with `toolsmith generate`'s; no
  `custom_tool_tell_answer` is listed afterwards;
- `registered`: the answer is a registered report, `notifications/tools/list_changed`
  arrives, `custom_tool_tell_answer` is listed and answers.

Prints one `ok ...` line per check; any failure raises, and the exit status is non-zero.
"""

import os
import sys

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLSMITH, PROJECT, EXPECT = sys.argv[1], sys.argv[2], sys.argv[3]

REQUEST = {
    "name": "tell_answer",
    "description": "Tells the answer to a question.",
    "parameters": {"question": "What to answer"},
    "language": "bash",
    "implementation": "printf '%s: 42\\n' \"$ARG_QUESTION\"",
    "tests": [{"input": {"question": "why"}, "expect": {"result": "why: 42"}}],
}


def server() -> StdioServerParameters:
    env = {name: os.environ[name] for name in ("HOME", "TOOLSMITH_HOME", "TMPDIR", "PATH")}
    return StdioServerParameters(command=TOOLSMITH, args=["serve"], env=env, cwd=PROJECT)


async def names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def main() -> None:
    changes = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.set()

    async with Client(stdio_client(server()), mode="legacy", message_handler=on_message, cache=None) as client:
        assert "custom_tool" in await names(client)
        result = await client.call_tool("custom_tool", REQUEST)
        text = "\n".join(block.text for block in result.content if block.type == "text")
        if EXPECT == "refused":
            assert result.is_error, result
            assert "hint: " in text, text
            for line in text.splitlines():
                print(f"refusal: {line}")
            assert "custom_tool_tell_answer" not in await names(client)
            print("ok refused with a hint, and nothing listed")
            return
        assert not result.is_error, text
        assert result.structured_content["status"] == "registered", result.structured_content
        print("ok registered")
        with anyio.fail_after(20):
            await changes.wait()
        print("ok list_changed")
        assert "custom_tool_tell_answer" in await names(client)
        answer = await client.call_tool("custom_tool_tell_answer", {"question": "how"})
        assert not answer.is_error, answer
        assert answer.content[0].text.strip() == "how: 42", answer
        print("ok the registered tool is listed and answers")


anyio.run(main)
