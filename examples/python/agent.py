#!/usr/bin/env python3
"""A local agent for ifaced in Python, with nothing but the standard library.

It offers two capabilities, adds them to the daemon's document when it
starts and removes them when it stops (peers in conversation see both
changes), subscribes to the daemon's event stream, and answers each
invocation a peer was permitted with POST /v1/invocations/{id}. ifaced has
already checked the conditions and the parameters against their schema
when an invocation arrives, so the agent only does the work.

It also answers plain text: a message that asks for a reply (an A2A
client's text message, a "message" event carrying an invocation) is
answered with POST /v1/invocations/{id}, the reply as result; and a peer's
message in a conversation (`ifaced say`, phase context or probe) is
answered in that conversation with POST /v1/say, phase recommend (a
capability request, a probe too, is answered by its invocation instead). A
recommend is never answered, so two such agents do not talk forever.

    python3 examples/python/agent.py [--home DIR]

The home is --home, else $IFACED_HOME, else ~/.ifaced, as for ifaced
itself. The daemon must run without [agent] webhook: with a webhook the
invocations go there instead of the event stream.

How it reaches the daemon: through the Unix socket <home>/api.sock when
there is one. The socket is mode 0600 in a home only its owner may write,
so what answers there is the daemon, and the token never crosses TCP.
Only without a socket (a home path too long for one) does it use the
loopback address in <home>/api.addr, and there it first asks the daemon to
prove it holds the token (GET /v1/hello) before sending it, since after an
unclean stop another process may hold that port. The token
(<home>/api.token) is new at every start of the daemon, so it is read
again whenever the agent reconnects.

The whole API is described in node/api/openapi.json (also served at
GET /v1/openapi.json).
"""

import argparse
import concurrent.futures
import hashlib
import hmac
import http.client
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time

# The capabilities this agent offers, as POST /v1/caps takes them.
CAPABILITIES = [
    {
        "name": "text.reverse",
        "description": "Reverse a text",
        "parameters": {
            "type": "object",
            "required": ["text"],
            "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 10000}},
        },
        "output_schema": {
            "type": "object",
            "required": ["reversed"],
            "properties": {"reversed": {"type": "string"}},
        },
    },
    {
        "name": "text.count",
        "description": "Count the words and characters of a text",
        "parameters": {
            "type": "object",
            "required": ["text"],
            "properties": {"text": {"type": "string", "maxLength": 100000}},
        },
        "output_schema": {
            "type": "object",
            "required": ["words", "characters"],
            "properties": {"words": {"type": "integer"}, "characters": {"type": "integer"}},
        },
    },
]


def run(capability, params):
    """Does the work of one invocation; an exception becomes the error the peer is told."""
    if capability == "text.reverse":
        return {"reversed": params["text"][::-1]}
    if capability == "text.count":
        return {"words": len(params["text"].split()), "characters": len(params["text"])}
    raise ValueError("this agent does not implement %r" % capability)


# The phases of a peer's message that the agent answers (with recommend).
ANSWERED_PHASES = ("context", "probe")

# How much of the other side's text a reply repeats.
MAX_QUOTED = 200


def reply_to(text):
    """The agent's reply to a plain-text message: what it heard, quoted as
    the other side's words (bounded), and what it offers."""
    quoted = text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED] + "\u2026"
    return ("Hello from the Python example agent. You said: %s. I can reverse a text (text.reverse) "
            "and count its words (text.count)." % json.dumps(quoted, ensure_ascii=False))


def log(*args):
    print("agent:", *args, file=sys.stderr, flush=True)


class APIError(Exception):
    """An error answer of the control API: {"error", "code", "field"}."""

    def __init__(self, status, body):
        self.status = status
        self.code = body.get("code", "")
        super().__init__("%d %s: %s" % (status, self.code, body.get("error", "")))


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


HELLO_LABEL = b"ifaced control API hello v1\n"


class Daemon:
    """The control API of the daemon running for one home."""

    def __init__(self, home):
        self.home = home

    def _file(self, name):
        return os.path.join(self.home, name)

    def connect(self, timeout=30):
        """A new connection to the daemon and the token to send on it."""
        # Whoever may write the home could have made its socket, as the
        # ifaced client also checks.
        if os.stat(self.home).st_mode & 0o022:
            raise PermissionError("%s is writable by group or others: run chmod go-w %s" % (self.home, self.home))
        with open(self._file("api.token")) as f:
            token = f.read().strip()
        sock = self._file("api.sock")
        if os.path.exists(sock):
            return UnixHTTPConnection(sock, timeout), token
        with open(self._file("api.addr")) as f:
            host, _, port = f.read().strip().rpartition(":")
        conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout)
        # Before the token goes out on this connection, the daemon proves
        # that it holds it.
        nonce = secrets.token_hex(32)
        conn.request("GET", "/v1/hello?nonce=" + nonce)
        resp = conn.getresponse()
        body = resp.read()
        want = hmac.new(token.encode(), HELLO_LABEL + nonce.encode(), hashlib.sha256).hexdigest()
        if resp.status != 200 or not hmac.compare_digest(json.loads(body).get("proof", ""), want):
            conn.close()
            raise ConnectionError("what listens on %s:%s is not the daemon of %s" % (host, port, self.home))
        return conn, token

    def call(self, method, path, body=None):
        """One request on a connection of its own; the answer's JSON, or None for 204."""
        conn, token = self.connect()
        try:
            headers = {"Authorization": "Bearer " + token}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status >= 300:
                raise APIError(resp.status, json.loads(raw or b"{}"))
            return json.loads(raw) if raw else None
        finally:
            conn.close()

    def events(self):
        """Subscribes to the event stream. The daemon subscribes before it
        sends the headers, so once this returns nothing is missed."""
        conn, token = self.connect(timeout=None)  # the stream stays open; heartbeats every 15 s
        conn.request("GET", "/v1/events", headers={"Authorization": "Bearer " + token})
        resp = conn.getresponse()
        if resp.status != 200:
            body = resp.read()
            conn.close()
            raise APIError(resp.status, json.loads(body or b"{}"))
        return EventStream(conn, resp)


class EventStream:
    """Server-sent events: "event: <type>", "data: <JSON>", a blank line."""

    def __init__(self, conn, resp):
        self.conn, self.resp = conn, resp

    def __iter__(self):
        """Yields each event as a dict until the stream ends (the daemon
        stopped, or dropped this subscriber after events_lost)."""
        data = []
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    return
                line = line.rstrip(b"\r\n")
                if line.startswith(b"data:"):
                    data.append(line[5:].lstrip(b" "))
                elif not line and data:
                    yield json.loads(b"\n".join(data))
                    data = []
                # Other lines: "event: <type>" (the type is in the data
                # too) and comments (": heartbeat").
        finally:
            self.conn.close()


class Agent:
    def __init__(self, daemon):
        self.daemon = daemon
        self.stopping = threading.Event()
        self.workers = concurrent.futures.ThreadPoolExecutor(max_workers=4)

    def add_capabilities(self):
        for cap in CAPABILITIES:
            try:
                doc = self.daemon.call("POST", "/v1/caps", cap)
            except APIError as e:
                if e.status != 409:
                    raise
                # Left by an earlier run: replace it with this run's.
                self.daemon.call("DELETE", "/v1/caps/" + cap["name"])
                doc = self.daemon.call("POST", "/v1/caps", cap)
            log("offering %s (document seq %d)" % (cap["name"], doc["seq"]))

    def remove_capabilities(self):
        for cap in CAPABILITIES:
            try:
                doc = self.daemon.call("DELETE", "/v1/caps/" + cap["name"])
                log("withdrew %s (document seq %d)" % (cap["name"], doc["seq"]))
            except (APIError, OSError) as e:
                log("withdrawing %s: %s" % (cap["name"], e))

    def answer(self, inv):
        try:
            ans = {"result": run(inv["capability"], inv.get("params"))}
        except Exception as e:  # the peer is told agent_error with this message
            ans = {"error": {"message": str(e) or type(e).__name__}}
        try:
            self.daemon.call("POST", "/v1/invocations/" + inv["invocation_id"], ans)
            log("answered %s %s from %s" % (inv["invocation_id"], inv["capability"], inv["peer"]))
        except APIError as e:  # 404: it timed out meanwhile
            log("answering %s: %s" % (inv["invocation_id"], e))

    def serve(self, on_ready):
        """Subscribes, offers the capabilities, and answers until stopped;
        reconnects (with a fresh token) when the stream ends."""
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                stream = self.daemon.events()
                # Subscribed first, so no invocation of a capability
                # offered next can be missed.
                self.add_capabilities()
                if on_ready:
                    on_ready()
                    on_ready = None
                backoff = 0.5
                for ev in stream:
                    self.handle(ev)
                log("the event stream ended; subscribing again")
            except (OSError, APIError, http.client.HTTPException) as e:
                if self.stopping.is_set():
                    break
                log("no daemon to talk to (%s); trying again in %.1f s" % (e, backoff))
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10)

    def answer_message(self, inv, text):
        """Answers a message that asks for a reply (an A2A text message)."""
        try:
            self.daemon.call("POST", "/v1/invocations/" + inv["invocation_id"], {"result": reply_to(text)})
            log("answered the message %s" % inv["invocation_id"])
        except APIError as e:  # 404: it timed out meanwhile
            log("answering the message %s: %s" % (inv["invocation_id"], e))

    def say_reply(self, conversation, text):
        """Answers a peer's message in its conversation."""
        try:
            self.daemon.call("POST", "/v1/say", {"conversation_id": conversation, "phase": "recommend", "text": reply_to(text)})
            log("replied in %s" % conversation)
        except APIError as e:  # the conversation closed meanwhile, say
            log("replying in %s: %s" % (conversation, e))

    def handle(self, ev):
        kind = ev.get("type")
        if kind == "invocation":
            self.workers.submit(self.answer, ev["invocation"])
        elif kind == "message":
            message = ev.get("message") or {}
            text = (message.get("body") or {}).get("text", "")
            headers = message.get("headers") or {}
            phase = headers.get("phase")
            log("message from %s (%s): %r" % (ev.get("peer") or "anonymous", phase, text[:MAX_QUOTED]))
            if ev.get("invocation"):
                self.workers.submit(self.answer_message, ev["invocation"], text)
            elif phase in ANSWERED_PHASES and not headers.get("capabilities") and ev.get("conversation_id"):
                # (A capability request is a probe too; its invocation is
                # what answers it.)
                self.workers.submit(self.say_reply, ev["conversation_id"], text)
        elif kind == "events_lost":
            log("fell behind:", ev.get("detail", ""))


def main():
    p = argparse.ArgumentParser(description="A local agent for ifaced, standard library only.")
    p.add_argument("--home", default=os.environ.get("IFACED_HOME") or os.path.expanduser("~/.ifaced"),
                   help="the daemon's data directory (default $IFACED_HOME, else ~/.ifaced)")
    args = p.parse_args()
    agent = Agent(Daemon(args.home))

    def stop(signum, frame):
        agent.stopping.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)

    def ready():
        print("ready", flush=True)  # on stdout, for whoever started the agent

    try:
        agent.serve(ready)
    except KeyboardInterrupt:
        pass
    agent.stopping.set()
    agent.workers.shutdown(wait=True)
    agent.remove_capabilities()


if __name__ == "__main__":
    main()
