"""The official MCP Python SDK (mcp==2.3.0) opens, uses and closes sessions of `toolsmith serve --http` without a warning.

Usage: mcp_http_session_close.py URL TOKEN

In each era (`legacy`: an `Mcp-Session-Id` session, which the SDK ends with `DELETE /mcp` when
the client closes; `modern`: the stateless 2026-07-28 revision) it opens a client, lists the
tools, calls `custom_tool_hello` and closes the client.
Every log record at WARNING or above, from any logger (the SDK's, httpx's, anyio's), and every
Python warning (routed to logging, none filtered out) is printed as `warning: ...`; then the exit
status is 1. Prints one `ok ...` line per era, and `ok no warning` at the end.
"""

import logging
import sys
import warnings

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]


class Recorder(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def era(era: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    mode = "legacy" if era == "legacy" else "auto"
    async with Client(streamable_http_client(URL, http_client=http), mode=mode, cache=None) as client:
        listed = await client.list_tools()
        assert "custom_tool_hello" in [tool.name for tool in listed.tools], listed
        hello = await client.call_tool("custom_tool_hello", {"name": "Ada"})
        assert hello.content[0].text == "Hello, Ada!", hello
        session = "a session" if era == "legacy" else "no session"
        print(f"ok {era}: {client.protocol_version}, {session}, listed and called", flush=True)
    # Leaving the block closed the client: in the legacy era, with `DELETE /mcp`.
    print(f"ok {era} closed", flush=True)


async def main() -> None:
    await era("legacy")
    await era("modern")


recorder = Recorder()
root = logging.getLogger()
root.addHandler(recorder)
# Records below WARNING are not wanted, but the root logger must let WARNING through to the
# handler whatever a library configured.
root.setLevel(logging.WARNING)
warnings.simplefilter("default")
logging.captureWarnings(True)
anyio.run(main)
for record in recorder.records:
    print(f"warning: {record.name} {record.levelname}: {record.getMessage()}", flush=True)
if recorder.records:
    sys.exit(1)
print("ok no warning", flush=True)
