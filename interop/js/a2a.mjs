// a2a.mjs BASE_URL talks to an ifaced daemon's A2A endpoint with
// @a2a-js/sdk's client, as the SDK's README shows (ClientFactory,
// createFromUrl, sendMessage, getTask) and with no ifaced-specific
// metadata:
//
//   - a text message: the local agent's reply comes back as a message;
//   - a message with a data part {"skill", "input"}: the skill's result;
//   - the text again with returnImmediately: a task, polled with getTask
//     until it ends;
//   - the text streamed with sendMessageStream (the SDK's streaming path,
//     which it takes when the card says streaming): the agent's reply as
//     the stream's one message event; and streamed with returnImmediately:
//     the task, then its status update carrying the reply;
//   - a message naming a skill the agent does not have: the SDK's error.
//
// It prints a one-line JSON summary and exits 0, or prints what failed and
// exits 1. node/httpapi's TestRealClientsAcceptTheEndpoints runs it
// against a daemon whose agent answers weather.forecast and text messages.

import { Role, taskStateToJSON } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";

class CheckError extends Error {}

function fail(msg) {
  throw new CheckError(msg);
}

const TEXT = "Hello, who are you?";

function message(part) {
  return {
    message: {
      messageId: crypto.randomUUID(),
      role: Role.ROLE_USER,
      parts: [part],
      contextId: "",
      taskId: "",
      extensions: [],
      referenceTaskIds: [],
      metadata: undefined,
    },
    configuration: undefined,
    metadata: undefined,
    tenant: "",
  };
}

const textPart = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" });
const dataPart = (value) => ({ content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "" });

// The result of sendMessage is a Message or a Task; a Task has a status.
const isTask = (r) => r && typeof r === "object" && "status" in r;

function firstPart(msg, what) {
  const c = msg?.parts?.[0]?.content;
  if (!c) fail(`${what}: the agent's message has no parts: ${JSON.stringify(msg)}`);
  return c;
}

async function main() {
  const base = process.argv[2];
  if (!base || process.argv.length !== 3) {
    process.stderr.write("usage: node a2a.mjs BASE_URL   (the daemon's public HTTP binding, e.g. http://127.0.0.1:8787)\n");
    process.exit(2);
  }
  const client = await new ClientFactory().createFromUrl(base);
  const out = { transport: client.transport?.constructor?.name, protocolVersion: client.protocolVersion };

  let res = await client.sendMessage(message(textPart(TEXT)));
  if (isTask(res)) fail(`sendMessage (text) returned a task, want the agent's message: ${JSON.stringify(res)}`);
  const text = firstPart(res, "sendMessage (text)");
  if (text.$case !== "text") fail(`sendMessage (text): the reply's part is ${text.$case}, want text`);
  out.text = text.value;
  out.role = res.role === Role.ROLE_AGENT ? "ROLE_AGENT" : String(res.role);

  res = await client.sendMessage(message(dataPart({ skill: "weather.forecast", input: { city: "Porto" } })));
  if (isTask(res)) fail(`sendMessage (skill) returned a task, want the agent's message: ${JSON.stringify(res)}`);
  const data = firstPart(res, "sendMessage (skill)");
  if (data.$case !== "data") fail(`sendMessage (skill): the reply's part is ${data.$case}, want data`);
  out.skill = data.value;

  const req = message(textPart(TEXT));
  req.configuration = { acceptedOutputModes: [], returnImmediately: true, historyLength: undefined, taskPushNotificationConfig: undefined };
  let task = await client.sendMessage(req);
  if (!isTask(task)) fail(`sendMessage (returnImmediately) returned a message, want a task: ${JSON.stringify(task)}`);
  out.task = { first: taskStateToJSON(task.status.state), polls: 0 };
  const terminal = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);
  while (!terminal.has(taskStateToJSON(task.status.state))) {
    if (++out.task.polls > 200) fail(`task ${task.id} still ${taskStateToJSON(task.status.state)} after 200 polls`);
    await new Promise((r) => setTimeout(r, 50)); // the client's polling interval
    task = await client.getTask({ id: task.id, historyLength: undefined, tenant: "" });
  }
  out.task.final = taskStateToJSON(task.status.state);
  const reply = task.status.message?.parts?.[0]?.content;
  out.task.reply = reply?.$case === "text" ? reply.value : JSON.stringify(reply);

  out.stream = { events: [] };
  for await (const ev of client.sendMessageStream(message(textPart(TEXT)))) {
    const p = ev.payload;
    out.stream.events.push(p?.$case);
    if (p?.$case === "message") {
      const c = firstPart(p.value, "sendMessageStream (text)");
      out.stream.text = c.$case === "text" ? c.value : JSON.stringify(c);
      out.stream.role = p.value.role === Role.ROLE_AGENT ? "ROLE_AGENT" : String(p.value.role);
    }
  }
  const streamed = message(textPart(TEXT));
  streamed.configuration = { acceptedOutputModes: [], returnImmediately: true, historyLength: undefined, taskPushNotificationConfig: undefined };
  out.taskStream = { events: [] };
  for await (const ev of client.sendMessageStream(streamed)) {
    const p = ev.payload;
    out.taskStream.events.push(p?.$case);
    if (p?.$case === "task") out.taskStream.first = taskStateToJSON(p.value.status.state);
    if (p?.$case === "statusUpdate") {
      out.taskStream.final = taskStateToJSON(p.value.status.state);
      const c = p.value.status.message?.parts?.[0]?.content;
      out.taskStream.reply = c?.$case === "text" ? c.value : JSON.stringify(c);
    }
  }

  try {
    await client.sendMessage(message(dataPart({ skill: "weather.tomorrow", input: {} })));
    fail("sendMessage (unknown skill) succeeded");
  } catch (e) {
    if (e instanceof CheckError) throw e;
    out.unknownSkill = { name: e.name, code: e.envelopeCode, message: e.message, details: Array.isArray(e.data) ? e.data.map((d) => d["@type"]) : e.data };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(`a2a.mjs: ${e instanceof CheckError ? e.message : e.stack ?? e}\n`);
  process.exit(1);
});
