// Nodes that answer GET /v1/models badly (and one that answers well), for `synapse cluster-config`
// (tests/cli/test_cluster.sh).
// usage: node fake_node.mjs
// Listens on one 127.0.0.1 port per behaviour (kernel-chosen) and prints "NAME PORT" per line,
// then "ready"; runs until killed.
import net from "node:net";

const response = (status, body) =>
  `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const ok = (body) => response("200 OK", body);
const models = (data) => JSON.stringify({ object: "list", data });

// Writes head, then repeat as fast as the client reads, until it closes.
const endless = (s, head, repeat) => {
  const pump = () => { while (s.writable && s.write(repeat)); };
  s.write(head);
  s.on("drain", pump);
  pump();
};

// Each behaviour: what to do with a connection once the request has arrived. All but "valid"
// misbehave.
const behaviours = {
  "valid": (s) => s.end(ok(models([{ id: "fake", object: "model", meta: { n_parallel: 3 } }]))),
  "not-json": (s) => s.end(ok("{\"object\": \"list\", \"data\": [")),
  "not-http": (s) => s.end("SSH-2.0-OpenSSH_9.2\r\n"),
  "no-data": (s) => s.end(ok(JSON.stringify({ object: "list" }))),
  "no-slots": (s) => s.end(ok(models([{ id: "a", object: "model", meta: {} }]))),
  "zero-slots": (s) => s.end(ok(models([{ id: "a", object: "model", meta: { n_parallel: 0 } }]))),
  "bad-alias": (s) => s.end(ok(models([{ id: "a b\nc", object: "model", meta: { n_parallel: 2 } }]))),
  "twice": (s) => s.end(ok(models([1, 2].map(() => ({ id: "a", meta: { n_parallel: 2 } }))))),
  "error-401": (s) => s.end(response("401 Unauthorized", JSON.stringify({ error: { message: "invalid API key" } }))),
  // A body far over the client's bound, declared or not.
  "huge": (s) => endless(s, "HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n", "x".repeat(1 << 16)),
  "huge-undeclared": (s) => endless(s, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n[", "1,".repeat(1 << 15)),
  "endless-headers": (s) => endless(s, "HTTP/1.1 200 OK\r\n", "X-Filler: " + "y".repeat(1000) + "\r\n"),
  "truncated": (s) => s.end("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"data\": ["),
  "bad-length": (s) => s.end("HTTP/1.1 200 OK\r\nContent-Length: 2\n{}\r\n\r\n{}"),
  "chunked": (s) => s.end("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
  "silent": () => {},                       // accepts, never answers
  "drip": (s) => {                          // one byte every 100 ms, forever
    const timer = setInterval(() => s.writable ? s.write("H") : clearInterval(timer), 100);
    s.on("close", () => clearInterval(timer));
  },
};

for (const [name, behave] of Object.entries(behaviours)) {
  const server = net.createServer((s) => {
    s.on("error", () => {});
    let head = "";
    s.on("data", (d) => {
      if (head.includes("\r\n\r\n")) return;
      head += d;
      if (head.includes("\r\n\r\n")) behave(s);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  console.log(`${name} ${server.address().port}`);
}
console.log("ready");
