package events

import (
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
)

// The local agent's message types: what it receives (an Invocation, as
// an event or through its webhook) and what it answers.

// Invocation is what the local agent receives.
type Invocation struct {
	ID             string            `json:"invocation_id"`
	Capability     string            `json:"capability"`
	Version        string            `json:"version"`
	Params         any               `json:"params,omitempty"`
	Peer           string            `json:"peer"`
	ConversationID string            `json:"conversation_id"`
	Granted        negotiate.Granted `json:"granted"` // the facts the request was decided on
	Deadline       time.Time         `json:"deadline"`
	// Message is set, and Capability empty, when a message asks for a
	// reply rather than a capability (see the file comment).
	Message *gossip.Message `json:"message,omitempty"`
}

// InvocationAnswer is what the local agent returns: a result, or an error.
type InvocationAnswer struct {
	Result any         `json:"result,omitempty"`
	Error  *AgentError `json:"error,omitempty"`
}

// AgentError is the agent's own account of a failure, passed on to the
// requester.
type AgentError struct {
	Message string `json:"message"`
}
