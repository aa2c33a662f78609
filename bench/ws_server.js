// A WebSocket server nobody here wrote (Node's `ws` package, installed by bench/install.sh ws) for bench/ws_bench.py:
// /echo answers each message with itself; /push sends one message on every new connection and holds it. It prints
// its counts on SIGTERM as JSON: {"connections": N, "messages": M, "most_open": K}.
// usage: NODE_PATH=bench/tools/node/node_modules node bench/ws_server.js PORT
const { WebSocketServer } = require("ws");
const counts = { connections: 0, messages: 0, open: 0, most_open: 0 };
const server = new WebSocketServer({ host: "127.0.0.1", port: Number(process.argv[2]), backlog: 4096 });
server.on("connection", (ws, req) => {
  counts.connections++;
  counts.open++;
  counts.most_open = Math.max(counts.most_open, counts.open);
  ws.on("close", () => counts.open--);
  if (req.url === "/push") {
    ws.send("tick");
    return;
  }
  ws.on("message", (data, binary) => {
    counts.messages++;
    ws.send(data, { binary });
  });
});
server.on("listening", () => console.log("listening"));
process.on("SIGTERM", () => {
  console.log(JSON.stringify(counts));
  process.exit(0);
});
