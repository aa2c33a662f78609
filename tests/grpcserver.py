"""A gRPC server nobody here wrote (grpcio's, its messages compiled by the real protoc of grpcio-tools, not by knee),
run as its own process by the tests, that counts what it was sent: GET /stats on its stats port (plain HTTP) answers
{"calls": {method: n}, "received": {method: messages}, "sent": {method: messages}, "most": concurrent calls}.

examples/grpc/hello.proto's Greeter: SayHello answers "hello FIRST" (a name "fail" is INVALID_ARGUMENT "no such
name: fail"); LotsOfReplies sends `times` replies; LotsOfGreetings answers once with the count of what it read;
BidiHello answers each message. With `limit`, a call beyond `limit` at once is RESOURCE_EXHAUSTED "more than LIMIT
calls at once"; with `delay_ms`, every call takes that long first. With `reflection`, the server's reflection service
is on (with `key`, for calls that carry the metadata x-key: KEY only)."""

from __future__ import annotations

import json
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from servers import Served, free_ports, spawn_listening

PROTO_DIR = Path(__file__).parents[1] / "examples" / "grpc"
PROTO = PROTO_DIR / "hello.proto"

SERVER = r"""
import collections, http.server, json, sys, tempfile, threading, time
from concurrent import futures
import grpc
from grpc_tools import protoc

port, stats_port, proto_dir, limit, delay_ms, reflect = sys.argv[1:7]
reflect, key = reflect.partition(":")[::2]
limit, delay = int(limit), int(delay_ms) / 1000.0
out = tempfile.mkdtemp()
if protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                f"{proto_dir}/hello.proto", f"{proto_dir}/names.proto"]) != 0:
    sys.exit("protoc failed")
sys.path.insert(0, out)
import hello_pb2, hello_pb2_grpc

lock = threading.Lock()
calls, received, sent = collections.Counter(), collections.Counter(), collections.Counter()
state = {"open": 0, "most": 0}

# A call is counted; past `limit` at once it is RESOURCE_EXHAUSTED. Its end is counted when its handler returns (in
# `calling`'s finally), before grpcio sends the answer: a client's next call never finds its last one still open.
def begin(method, context):
    with lock:
        calls[method] += 1
        state["open"] += 1
        state["most"] = max(state["most"], state["open"])
        over = limit and state["open"] > limit
    if over:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"more than {limit} calls at once")
    if delay:
        time.sleep(delay)

def end():
    with lock:
        state["open"] -= 1

def count(counter, method, n=1):
    with lock:
        counter[method] += n

def calling(method, stream=False):
    def wrap(f):
        if stream:
            def g(self, request, context):
                try:
                    begin(method, context)
                    yield from f(self, request, context)
                finally:
                    end()
        else:
            def g(self, request, context):
                try:
                    begin(method, context)
                    return f(self, request, context)
                finally:
                    end()
        return g
    return wrap

class Greeter(hello_pb2_grpc.GreeterServicer):
    @calling("SayHello")
    def SayHello(self, request, context):
        count(received, "SayHello")
        if request.name.first == "fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no such name: fail")
        count(sent, "SayHello")
        return hello_pb2.HelloReply(message=f"hello {request.name.first}", n=request.times)

    @calling("LotsOfReplies", stream=True)
    def LotsOfReplies(self, request, context):
        count(received, "LotsOfReplies")
        for i in range(request.times):
            count(sent, "LotsOfReplies")
            yield hello_pb2.HelloReply(message=f"hello {request.name.first}", n=i)

    @calling("LotsOfGreetings")
    def LotsOfGreetings(self, request_iterator, context):
        n = 0
        for r in request_iterator:
            n += 1
            count(received, "LotsOfGreetings")
        count(sent, "LotsOfGreetings")
        return hello_pb2.HelloReply(message=f"hello {n}", n=n)

    @calling("BidiHello", stream=True)
    def BidiHello(self, request_iterator, context):
        for r in request_iterator:
            count(received, "BidiHello")
            count(sent, "BidiHello")
            yield hello_pb2.HelloReply(message=f"hello {r.name.first}", n=r.times)

# With a key: the reflection service answers only calls that carry metadata x-key: KEY (UNAUTHENTICATED otherwise).
class NeedsKey(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        given = dict(details.invocation_metadata).get("x-key")
        if key and "ServerReflection" in details.method and given != key:
            def refuse(requests, context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "no key")
            return grpc.stream_stream_rpc_method_handler(refuse)
        return continuation(details)

server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), maximum_concurrent_rpcs=None,
                     interceptors=[NeedsKey()])
hello_pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
if reflect == "1":
    from grpc_reflection.v1alpha import reflection
    names = (hello_pb2.DESCRIPTOR.services_by_name["Greeter"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
if len(sys.argv) > 7:  # grpcs: the server's chain and key, and the CAs its clients' certificates must chain to
    chain, key, cas = (open(p, "rb").read() for p in sys.argv[7:10])
    creds = grpc.ssl_server_credentials([(key, chain)], root_certificates=cas, require_client_auth=True)
    server.add_secure_port(f"127.0.0.1:{port}", creds)
else:
    server.add_insecure_port(f"127.0.0.1:{port}")
server.start()

class Stats(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with lock:
            body = json.dumps({"calls": calls, "received": received, "sent": sent, "most": state["most"]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode() + b"\n")
    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(stats_port)), Stats).serve_forever()
"""


@dataclass
class GrpcServer(Served):
    stats_port: int = field(kw_only=True)
    secure: bool = False

    def url(self, method: str = "SayHello") -> str:
        return f"{'grpcs' if self.secure else 'grpc'}://127.0.0.1:{self.port}/knee.hello.Greeter/{method}"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.stats_port}/stats", timeout=5) as r:
            return json.loads(r.read())


def start_grpc_server(
    limit: int = 0,
    delay_ms: int = 0,
    reflection: bool = False,
    tls: tuple[str, str, str] | None = None,
    key: str = "",
) -> GrpcServer:
    """The server on free ports of 127.0.0.1 (h2c; with `tls`, its certificate chain, its key and the CAs of the
    client certificates it requires: TLS), its stats on another."""
    port, stats_port = free_ports(2)
    argv = [sys.executable, "-c", SERVER, str(port), str(stats_port), str(PROTO_DIR), str(limit), str(delay_ms)]
    reflect = ("1" if reflection else "0") + (f":{key}" if key else "")
    proc = spawn_listening([*argv, reflect, *(tls or ())], [stats_port, port], timeout_s=30)
    return GrpcServer(port, proc, stats_port=stats_port, secure=tls is not None)
