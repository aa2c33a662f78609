// A knee worker in Java (docs/worker-protocol.md): each client connects, authenticates once, then
// fetches a document, operation after operation, on its own kept-alive connection. The clients of one
// process run on a thread pool; knee times every operation and the three steps this program reports.
//
//   javac -d build examples/workers/java/KneeWorker.java
//   export CONTENT_PASSWORD=…
//   knee run -c 20 -d 30s --var target=http://127.0.0.1:8080 --worker -- java -cp build KneeWorker
//
// It talks HTTP/1.1 itself over a Socket against `knee target` with a login ([login] path = "/login",
// docs/demo-target.md): connect, POST /login (user=userN&password=$CONTENT_PASSWORD), then GET the document
// with the session cookie. Vars: target, path (default /files/doc). No library beyond the JDK.

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.Socket;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class KneeWorker {
    private static final Pattern NUMBER = Pattern.compile("\"(client|id)\":(\\d+)");
    private static final Pattern VAR = Pattern.compile("\"(\\w+)\":\"((?:[^\"\\\\]|\\\\.)*)\"");
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    /** One client's connection and session, kept across its operations. */
    private static final class Session {
        Socket socket;
        InputStream in;
        OutputStream out;
        String cookie;
    }

    private static final Map<Long, Session> SESSIONS = new HashMap<>();
    private static String host = "127.0.0.1";
    private static int port = 80;
    private static String path = "/files/doc";

    public static void main(String[] args) throws IOException {
        var stdin = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        String start = stdin.readLine();
        if (start == null || !start.contains("\"op\":\"start\"")) {
            System.err.println("KneeWorker: expected knee's start message");
            System.exit(2);
        }
        Map<String, String> vars = new HashMap<>();
        Matcher v = VAR.matcher(start.substring(Math.max(0, start.indexOf("\"vars\""))));
        while (v.find()) vars.put(v.group(1), v.group(2));
        try {
            URI target = URI.create(vars.getOrDefault("target", "http://127.0.0.1:8080"));
            host = target.getHost();
            port = target.getPort() > 0 ? target.getPort() : 80;
        } catch (IllegalArgumentException e) {
            reply("{\"ready\":false,\"error\":\"var target is not a URL: " + escape(e.getMessage()) + "\"}");
            System.exit(2);
        }
        path = vars.getOrDefault("path", path);
        ExecutorService pool = Executors.newCachedThreadPool();
        reply("{\"ready\":true}");
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.contains("\"op\":\"stop\"")) break;
            if (!line.contains("\"op\":\"run\"")) continue;
            long client = -1, id = -1;
            Matcher m = NUMBER.matcher(line);
            while (m.find()) {
                if (m.group(1).equals("client")) client = Long.parseLong(m.group(2));
                else id = Long.parseLong(m.group(2));
            }
            final long c = client, i = id;
            pool.execute(() -> reply(operation(c, i)));
        }
        // The operations knee has written are started as far as it counts: finish them (knee waits 2 s for the
        // exit) so that the service sees every one, abandoned or not.
        pool.shutdown();
        try {
            pool.awaitTermination(2, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        OUT.flush();
        System.exit(0);
    }

    private static synchronized void reply(String json) {
        OUT.println(json);
        OUT.flush();
    }

    /** One operation of one client: connect and authenticate when it has no session, then fetch. */
    private static String operation(long client, long id) {
        Session s;
        synchronized (SESSIONS) {
            s = SESSIONS.computeIfAbsent(client, k -> new Session());
        }
        synchronized (s) {
            Map<String, Double> steps = new java.util.LinkedHashMap<>();
            try {
                if (s.socket == null) {
                    long t = System.nanoTime();
                    s.socket = new Socket(host, port);
                    s.socket.setTcpNoDelay(true);
                    s.in = new BufferedInputStream(s.socket.getInputStream());
                    s.out = s.socket.getOutputStream();
                    steps.put("connect", (System.nanoTime() - t) / 1e9);
                }
                if (s.cookie == null) {
                    long t = System.nanoTime();
                    String password = System.getenv().getOrDefault("CONTENT_PASSWORD", "");
                    String form = "user=user" + client + "&password=" + URLEncoder.encode(password, StandardCharsets.UTF_8);
                    Response r = exchange(s, "POST", "/login", form, null);
                    steps.put("auth", (System.nanoTime() - t) / 1e9);
                    if (r.status != 200) return failed(client, id, "AuthError", r.body, steps);
                    s.cookie = r.cookie;
                }
                long t = System.nanoTime();
                Response r = exchange(s, "GET", path, null, s.cookie);
                steps.put("fetch", (System.nanoTime() - t) / 1e9);
                if (r.status != 200) return failed(client, id, "FetchError", r.status + ": " + r.body, steps);
                return "{\"client\":" + client + ",\"id\":" + id + ",\"ok\":true,\"steps\":" + json(steps)
                        + ",\"bytes\":" + r.length + "}";
            } catch (IOException e) {
                close(s);
                return failed(client, id, e.getClass().getSimpleName(), String.valueOf(e.getMessage()), steps);
            }
        }
    }

    private static final class Response {
        int status;
        String body = "";
        String cookie;
        int length;
    }

    /** One HTTP/1.1 request and response on the client's connection. */
    private static Response exchange(Session s, String method, String target, String body, String cookie)
            throws IOException {
        byte[] payload = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        StringBuilder head = new StringBuilder()
                .append(method).append(' ').append(target).append(" HTTP/1.1\r\n")
                .append("Host: ").append(host).append(':').append(port).append("\r\n")
                .append("Content-Length: ").append(payload.length).append("\r\n");
        if (body != null) head.append("Content-Type: application/x-www-form-urlencoded\r\n");
        if (cookie != null) head.append("Cookie: ").append(cookie).append("\r\n");
        s.out.write(head.append("\r\n").toString().getBytes(StandardCharsets.US_ASCII));
        s.out.write(payload);
        s.out.flush();
        Response r = new Response();
        String status = readLine(s.in);
        if (status == null) throw new IOException("the server closed the connection");
        r.status = Integer.parseInt(status.split(" ")[1]);
        int length = 0;
        String line;
        while ((line = readLine(s.in)) != null && !line.isEmpty()) {
            int colon = line.indexOf(':');
            String name = line.substring(0, colon).trim().toLowerCase();
            String value = line.substring(colon + 1).trim();
            if (name.equals("content-length")) length = Integer.parseInt(value);
            if (name.equals("set-cookie")) r.cookie = value.split(";")[0];
        }
        byte[] data = s.in.readNBytes(length);
        if (data.length < length) throw new IOException("the server closed the connection in a body");
        r.length = length;
        r.body = new String(data, 0, Math.min(data.length, 200), StandardCharsets.UTF_8).trim();
        return r;
    }

    private static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1) {
            if (c == '\n') return b.toString(StandardCharsets.US_ASCII).replaceAll("\r$", "");
            b.write(c);
        }
        return b.size() == 0 ? null : b.toString(StandardCharsets.US_ASCII);
    }

    private static void close(Session s) {
        try {
            if (s.socket != null) s.socket.close();
        } catch (IOException ignored) {
            // closing a broken connection: nothing to do
        }
        s.socket = null;
        s.cookie = null;
    }

    private static String failed(long client, long id, String error, String message, Map<String, Double> steps) {
        return "{\"client\":" + client + ",\"id\":" + id + ",\"ok\":false,\"error\":\"" + escape(error)
                + "\",\"message\":\"" + escape(message) + "\",\"steps\":" + json(steps) + "}";
    }

    private static String json(Map<String, Double> steps) {
        StringBuilder b = new StringBuilder("{");
        for (var e : steps.entrySet()) {
            if (b.length() > 1) b.append(',');
            b.append('"').append(escape(e.getKey())).append("\":").append(e.getValue());
        }
        return b.append('}').toString();
    }

    private static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') b.append('\\').append(ch);
            else if (ch < 0x20) b.append(' ');
            else b.append(ch);
        }
        return b.toString();
    }
}
