// mcp.mjs IFACED_BIN HOME PEER [ENDPOINT] uses ifaced's MCP server with the
// official TypeScript SDK's client (@modelcontextprotocol/sdk), as an
// agent host would:
//
//   - over stdio, starting `IFACED_BIN mcp --home HOME` itself;
//   - with ENDPOINT, also over streamable HTTP at ENDPOINT (the daemon's
//     /v1/mcp), sending the control API token from $IFACED_MCP_TOKEN.
//
// On each it lists the tools, greets PEER, shows what PEER offers, invokes
// doc.summarize (through invoke and through the peer's own tool) and
// calendar.availability, which PEER refuses, and calls a tool that does
// not exist. The SDK validates every structured result against the tool's
// output schema. It prints a one-line JSON summary per transport and
// exits 0, or prints what failed and exits 1. cmd/ifaced's
// TestMCPTypeScriptClient runs it.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [bin, home, peer, endpoint] = process.argv.slice(2);
if (!bin || !home || !peer) {
  console.error("usage: node mcp.mjs IFACED_BIN HOME PEER [ENDPOINT]");
  process.exit(2);
}

function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function exercise(transport) {
  // The client tells the transport the version the handshake settled on.
  let negotiated = null;
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    negotiated = v;
    setVersion?.(v);
  };
  const client = new Client({ name: "ifaced-interop", version: "1.0.0" });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    const invokeTool = tools.find((t) => t.name === "invoke");
    const greet = await client.callTool({ name: "greet_peer", arguments: { peer, disclosure: "public" } });
    if (greet.isError) throw new Error(`greet_peer: ${text(greet)}`);
    const shown = await client.callTool({ name: "show_peer", arguments: { peer } });
    const offers = shown.structuredContent?.capabilities ?? [];
    const summarize = offers.find((o) => o.name === "doc.summarize");
    const invoked = await client.callTool({
      name: "invoke",
      arguments: { peer, capability: "doc.summarize", params: { text: "one two three", max_words: 2 } },
    });
    if (invoked.isError) throw new Error(`invoke: ${text(invoked)}`);
    // The peer's own tool, listed again now that the greeting cached its view.
    const again = await client.listTools();
    const own = again.tools.find((t) => t.name === summarize?.tool);
    let ownResult = null;
    if (own) {
      const r = await client.callTool({ name: own.name, arguments: { text: "alpha beta", max_words: 1 } });
      ownResult = r.isError ? `error: ${text(r)}` : r.structuredContent;
    }
    const refused = await client.callTool({
      name: "invoke",
      arguments: { peer, capability: "calendar.availability", params: { days: 3 } },
    });
    let unknown;
    try {
      await client.callTool({ name: "no_such_tool", arguments: {} });
      unknown = "accepted";
    } catch (e) {
      unknown = e.message;
    }
    return {
      protocolVersion: negotiated,
      server: client.getServerVersion()?.name,
      tools: names.filter((n) => !n.includes("__")).sort(),
      invokeAnnotations: invokeTool?.annotations,
      summary: invoked.structuredContent?.result?.summary,
      ownTool: own?.name ?? null,
      ownResult,
      refusedIsError: refused.isError === true,
      refusal: text(refused),
      unknown,
    };
  } finally {
    await client.close();
  }
}

try {
  const out = {};
  out.stdio = await exercise(new StdioClientTransport({ command: bin, args: ["mcp", "--home", home], stderr: "inherit" }));
  if (endpoint) {
    const token = process.env.IFACED_MCP_TOKEN;
    if (!token) throw new Error("IFACED_MCP_TOKEN is not set");
    out.http = await exercise(
      new StreamableHTTPClientTransport(new URL(endpoint), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
  }
  console.log(JSON.stringify(out));
} catch (e) {
  console.error(`mcp.mjs: ${e.stack ?? e}`);
  process.exit(1);
}
