"""The official MCP Python SDK (mcp==2.3.0) against `toolsmith serve --http`, in both eras.

Usage: mcp_http_client.py URL TOKEN
Prints one `ok ...` line per check; any failure raises, and the exit status is non-zero.
"""

import asyncio
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]


def transport():
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    return streamable_http_client(URL, http_client=http)


async def era(mode: str, expected_version: str) -> None:
    async with Client(transport(), mode=mode) as client:
        assert client.protocol_version == expected_version, client.protocol_version
        listed = await client.list_tools(cache_mode="refresh")
        names = [tool.name for tool in listed.tools]
        assert "custom_tool_hello" in names and "custom_tool_stats" in names, names
        hello = await client.call_tool("custom_tool_hello", {"name": "Ada"})
        assert not hello.is_error, hello
        assert hello.content[0].text == "Hello, Ada!", hello
        # The SDK checks structuredContent against the listed outputSchema itself.
        stats = await client.call_tool("custom_tool_stats", {})
        assert stats.structured_content == {"count": 3}, stats
        invalid = await client.call_tool("custom_tool_hello", {"name": 7})
        assert invalid.is_error, invalid
        print(f"ok {mode}: {expected_version}, {len(names)} tools, hello, stats, invalid arguments")


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
    await era("legacy", "2025-11-25")
    await era("auto", "2026-07-28")
    await refused()


asyncio.run(main())
