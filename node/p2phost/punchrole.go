package p2phost

import (
	"bytes"
	"errors"
	"net"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/multiformats/go-multistream"
	"github.com/multiformats/go-varint"
)

// Which side of the security handshake a TCP hole punch's connection
// takes. DCUtR names one side the client (the initiator of the
// handshake) and the other the server, assuming both dials meet in a
// simultaneous open. Behind routers that answer, they often do not: a
// refused connect closes its socket, and the peer's next SYN then reaches
// this side's listener, which accepts it and, as every listener does,
// takes the responder's side. When the peer holding that listener is the
// client, and the server's connect is the one that completed, both sides
// wait for the other to begin, until the dial's deadline (5 s), and the
// round fails: in the lab 2 of 20 reject-TCP attempts were lost that way
// (issue 27), each with `accept upgrade error` on the client's listener.
//
// The server cannot tell from its socket whether a listener or a
// connecting socket answered its SYN (both answer with a SYN-ACK), but it
// can tell from what arrives: multistream-select, which opens the
// security negotiation, has the initiator send its header and its first
// proposal in one write, and the responder send its header alone and then
// wait. So the server reads first, for at most wait: a proposal (any byte
// past the header) means the peer begins and the server responds, as
// DCUtR says; a header alone means a listener answered, and the server
// begins. Silence keeps DCUtR's role. What was read is handed on to the
// handshake unchanged. The client needs none of this: its connect either
// met the server's (a simultaneous open, the server responds) or reached
// the server's listener (which responds).

// punchRoleWait bounds serverRole's read: an initiator's proposal or a
// listener's header leaves the far side at once, so a round trip and the
// far side's scheduling; a loaded machine, a slow path.
const punchRoleWait = time.Second

// punchRoleSettle is how long serverRole waits for a proposal after the
// header alone came: the initiator's header and proposal are one write,
// and so nearly always one segment.
const punchRoleSettle = 20 * time.Millisecond

// msHeader is multistream-select's header as it travels: a varint length,
// the protocol ID and a newline.
var msHeader = append(varint.ToUvarint(uint64(len(multistream.ProtocolID)+1)), multistream.ProtocolID+"\n"...)

// serverRole reads what the peer sends first on conn (see above) and
// returns a connection that gives back what was read, then the rest of
// conn's, and the direction the server side of a hole punch takes in the
// security handshake (DirInbound: the responder's). It reads at most
// len(msHeader) plus one buffer, for at most wait.
func serverRole(conn net.Conn, wait time.Duration) (net.Conn, network.Direction) {
	var got []byte
	buf := make([]byte, 256)
	deadline := time.Now().Add(wait)
	for {
		if bytes.Equal(got, msHeader) {
			deadline = minTime(deadline, time.Now().Add(punchRoleSettle))
		}
		if err := conn.SetReadDeadline(deadline); err != nil {
			break
		}
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if len(got) > len(msHeader) || !bytes.HasPrefix(msHeader, got) || err != nil {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	replay := &replayConn{Conn: conn, head: got}
	if bytes.Equal(got, msHeader) {
		return replay, network.DirOutbound // a listener answered: it waits for us
	}
	return replay, network.DirInbound
}

// replayConn is a connection whose first reads give back head.
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite and CloseRead keep the half-closes of the TCP connection
// underneath (security transports and muxers look for them).
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (c *replayConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return errors.ErrUnsupported
}
