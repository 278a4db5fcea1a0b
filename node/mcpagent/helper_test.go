package mcpagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is also the MCP servers the tests start: run with
// helperEnv set, it serves in that mode on its stdio instead of testing.
const helperEnv = "MCPAGENT_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := serve(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperConfig is a config that starts this test binary as a server in
// mode, every tool offered to everyone (an empty default overlay).
func helperConfig(mode string) Config {
	return Config{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: []string{helperEnv + "=" + mode}, Prefix: "helper",
		Default: &Overlay{}}
}

type echoIn struct {
	Text string `json:"text"`
}
type sumIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}
type sumOut struct {
	Sum float64 `json:"sum"`
}

func serve(mode string) error {
	switch mode {
	case "sdk":
		return serveSDK()
	case "hang":
		_, err := io.Copy(io.Discard, os.Stdin) // never answers; ends when stdin closes
		return err
	case "exit":
		return errors.New("cannot open the database")
	case "badschema", "garbage":
		return serveRaw(mode)
	case "env":
		return serveEnv()
	}
	return fmt.Errorf("no mode %q", mode)
}

// serveSDK is a server built with the Go SDK, on stdio.
func serveSDK() error {
	s := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "getSum", Description: "Add two numbers"}, func(_ context.Context, _ *mcp.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
		return nil, sumOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the disk is full")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Never answers"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	// A schema that does not compile: "nope" is no JSON Schema type.
	s.AddTool(&mcp.Tool{Name: "broken", Description: "Has an invalid schema",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "nope"}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	return s.Run(context.Background(), &mcp.StdioTransport{})
}

// serveEnv is a server whose one tool, environ, reports the environment
// it was started with, one KEY=value a line.
func serveEnv() error {
	s := mcp.NewServer(&mcp.Implementation{Name: "env", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "environ", Description: "Report this server's environment"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
	})
	return s.Run(context.Background(), &mcp.StdioTransport{})
}

// serveRaw speaks JSON-RPC by hand, to send what the SDK would not: in
// mode "garbage", a line that is not JSON-RPC in answer to tools/call.
func serveRaw(mode string) error {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			return err
		}
		if req.ID == nil {
			continue // a notification
		}
		answer := func(result any) error {
			return out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		var err error
		switch req.Method {
		case "initialize":
			err = answer(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "raw", "version": "1"}})
		case "tools/list":
			err = answer(map[string]any{"tools": []any{
				map[string]any{"name": "good", "description": "Works", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "bad", "description": "Its schema is no schema",
					"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"minimum": "five"}}}},
			}})
		case "tools/call":
			if mode == "garbage" {
				_, err = fmt.Fprintln(os.Stdout, `{"jsonrpc": "2.0", "id": this is not JSON`)
			} else {
				err = answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}})
			}
		default:
			err = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
		if err != nil {
			return err
		}
	}
	return in.Err()
}
