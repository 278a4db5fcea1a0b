// Command example-agent serves the example agent's webhook on a local
// address. Point a daemon at it with `[agent] webhook =
// "http://127.0.0.1:8085/"` and add the capabilities from
// examples/agent/capabilities.toml to its config.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/ifaced/ifaced/examples/agent"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8085", "address to serve the webhook on")
	flag.Parse()
	log.Printf("example agent listening on http://%s/", *addr)
	log.Fatal(http.ListenAndServe(*addr, agent.Handler(nil)))
}
