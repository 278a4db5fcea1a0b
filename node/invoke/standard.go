package invoke

import (
	"github.com/ifaced/ifaced/negotiate"
)

// standardAnswers answers the IFP-7 interoperability capabilities (IFP-7
// §1.2) that the daemon itself implements, when the owner's document
// declares them: a request for one never reaches the local agent, which
// cannot know the daemon's protocols, and works with no agent at all.
// What each answers:
//
//   - ping: "pong".
//   - capabilities.get: the requester's view of the document, signed, as
//     the greeting would carry it (an HTTP caller's view over HTTP).
//   - gossip.exchange, message.receive, message.reply, identity.verify:
//     these name protocols the daemon speaks rather than operations, so
//     the answer says that they are supported and how they are used.
//
// The conditions and parameter schema of the declared capability apply
// first, as to any capability (invoker.execute); every other name goes to
// the agent.
type standardAnswers struct {
	docs Documents
}

func newStandardAnswers(docs Documents) *standardAnswers { return &standardAnswers{docs: docs} }

// supportNotes say how each protocol capability is used.
var supportNotes = map[string]string{
	"gossip.exchange": "greet this daemon: libp2p /ifp/4/conversation/1.0.0, or an IFP-3 greeting to POST /.well-known/iface/inbox",
	"message.receive": "send signed IFP-4 messages in a conversation, to the HTTPS inbox, or through this daemon's mailbox relays",
	"message.reply":   "answers carry thread.in_reply_to with the message ID they answer",
	"identity.verify": "messages and documents are signed with Ed25519 as IFP-5 says; the signer is the did:key of this daemon's peer ID",
}

// AnsweredByDaemon reports whether name is one of the capabilities this
// daemon answers itself when its document declares them (ping,
// capabilities.get and the protocol notes above): a request for one never
// waits on the local agent, so a transport that bounds the requests
// waiting on the agent (the HTTP binding's invocation slots) need not
// count it.
func AnsweredByDaemon(name string) bool {
	_, note := supportNotes[name]
	return note || name == "ping" || name == "capabilities.get"
}

// answer runs name for a requester granted g if the daemon answers it
// itself; ok is false for a name the agent answers.
func (s *standardAnswers) answer(name string, g negotiate.Granted, requester string) (result any, ok bool, err error) {
	switch name {
	case "ping":
		return "pong", true, nil
	case "capabilities.get":
		v, err := s.docs.View(g.Facts(requester, 0))
		if err != nil {
			return nil, true, err
		}
		return negotiate.MustJSONValue(v.Doc), true, nil
	}
	if note, ok := supportNotes[name]; ok {
		return map[string]any{"supported": true, "ifp_support": negotiate.MustJSONValue(s.docs.Current().IFPSupport), "how": note}, true, nil
	}
	return nil, false, nil
}
