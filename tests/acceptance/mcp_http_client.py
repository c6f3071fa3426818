"""The official MCP Python SDK (mcp==2.3.0) against `toolsmith serve --http`, in both eras.

Usage: mcp_http_client.py URL TOKEN

In each era (`legacy`: `initialize` and an `Mcp-Session-Id` session; `modern`: the stateless
2026-07-28 revision, negotiated by `server/discover`) it lists, calls, calls a failing tool,
sends invalid arguments, calls an unknown tool, follows a call's progress, cancels a slow call,
and hears `list_changed` when a tool file is added.

Prints one `ok ...` line per check; any failure raises, and the exit status is non-zero.
What the script cannot see from inside is asked of the test that runs it, one line on stdout
(`ask WHAT ERA`) answered by one line on stdin (`go`):
- `ask running ERA`: the slow tool runs; the test notes its processes;
- `ask cancelled ERA`: the call was cancelled; the test waits until those processes are gone;
- `ask install ERA`: the test adds the tool file `fresh_ERA` to the tools directory.
"""

import sys

import anyio
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

URL, TOKEN = sys.argv[1], sys.argv[2]

TOOLS = [
    "custom_tool",
    "custom_tool_counter",
    "custom_tool_fail",
    "custom_tool_hello",
    "custom_tool_peek",
    "custom_tool_slow",
    "custom_tool_stats",
    "custom_tool_wipe",
]


def transport():
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    return streamable_http_client(URL, http_client=http)


async def ask(what: str, era: str) -> None:
    """Asks the test to do or check `what`, and waits for its answer."""
    print(f"ask {what} {era}", flush=True)
    answer = await anyio.to_thread.run_sync(sys.stdin.readline)
    assert answer.strip() == "go", f"the test answered {answer!r} to {what} {era}"


async def lists_and_calls(client: Client, era: str) -> None:
    listed = await client.list_tools()
    # A tool the previous era added is listed too.
    names = sorted(tool.name for tool in listed.tools if not tool.name.startswith("custom_tool_fresh_"))
    assert names == TOOLS, names
    hello = await client.call_tool("custom_tool_hello", {"name": "Ada"})
    assert not hello.is_error, hello
    assert hello.content[0].text == "Hello, Ada!", hello
    # The SDK checks structuredContent against the listed outputSchema itself.
    stats = await client.call_tool("custom_tool_stats", {})
    assert stats.structured_content == {"count": 3}, stats
    fail = await client.call_tool("custom_tool_fail", {})
    assert fail.is_error, fail
    assert fail.meta["toolsmith/error_code"] == "TOOL_CRASHED", fail
    assert "(error_code: TOOL_CRASHED)" in fail.content[0].text, fail
    invalid = await client.call_tool("custom_tool_hello", {"name": 7})
    assert invalid.is_error, invalid
    assert invalid.meta["toolsmith/error_code"] == "INVALID_PARAMS", invalid
    try:
        unknown = await client.call_tool("custom_tool_nope", {})
    except MCPError as error:
        assert error.code == types.INVALID_PARAMS, error.error
        assert "custom_tool_nope" in error.message, error.error
    else:
        raise AssertionError(f"an unknown tool was answered: {unknown}")
    print(f"ok {era} calls: {len(names)} tools, hello, stats, failing, invalid arguments, unknown tool")


async def progress(client: Client, era: str) -> None:
    steps = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        steps.append((value, total, message))

    done = await client.call_tool("custom_tool_counter", {}, progress_callback=on_progress)
    assert done.content[0].text == "done", done
    assert steps == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], steps
    print(f"ok {era} progress: {len(steps)} steps")


async def cancellation(client: Client, era: str) -> None:
    answered = []

    async def slow() -> None:
        answered.append(await client.call_tool("custom_tool_slow", {}))

    async with anyio.create_task_group() as group:
        group.start_soon(slow)
        await ask("running", era)
        # Cancelling the task abandons the request: in the legacy era the SDK sends
        # `notifications/cancelled`, in the modern era it closes the request's stream.
        group.cancel_scope.cancel()
    assert not answered, answered
    await ask("cancelled", era)
    # The server goes on.
    hello = await client.call_tool("custom_tool_hello", {"name": "again"})
    assert hello.content[0].text == "Hello, again!", hello
    print(f"ok {era} cancellation")


async def list_changed(client: Client, era: str, changes: anyio.Event | None) -> None:
    fresh = f"custom_tool_fresh_{era}"
    if changes is None:
        async with client.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed, subscription.honored
            await ask("install", era)
            with anyio.fail_after(20):
                async for event in subscription:
                    if type(event).__name__ == "ToolsListChanged":
                        break
    else:
        await ask("install", era)
        with anyio.fail_after(20):
            await changes.wait()
    names = [tool.name for tool in (await client.list_tools()).tools]
    assert fresh in names, names
    called = await client.call_tool(fresh, {})
    assert called.content[0].text == f"new {era}", called
    print(f"ok {era} list_changed: {fresh} listed and called")


async def era(era: str) -> None:
    changes = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.set()

    mode = "legacy" if era == "legacy" else "auto"
    async with Client(transport(), mode=mode, message_handler=on_message, cache=None) as client:
        expected = "2025-11-25" if era == "legacy" else "2026-07-28"
        assert client.protocol_version == expected, client.protocol_version
        print(f"ok {era}: {client.protocol_version}")
        await lists_and_calls(client, era)
        await progress(client, era)
        await cancellation(client, era)
        # A legacy session hears of changes on its session stream; a modern client listens.
        await list_changed(client, era, changes if era == "legacy" else None)


async def refused() -> None:
    http = create_mcp_http_client(headers={"Authorization": "Bearer wrong-token-wrong-token"})
    try:
        async with Client(streamable_http_client(URL, http_client=http), mode="legacy") as client:
            await client.list_tools()
    except BaseException as error:  # the SDK wraps the 401 in an exception group
        print(f"ok refused without the token: {type(error).__name__}")
        return
    raise AssertionError("a wrong token was accepted")


async def main() -> None:
    await era("legacy")
    await era("modern")
    await refused()


anyio.run(main)
